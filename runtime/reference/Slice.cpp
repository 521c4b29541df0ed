// Reference slice, pad, concatenate (element by element over multi-indices, any element type)
// and select.
#include <vector>

#include "runtime/base/Index.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

int64_t linearIndex(std::span<const int64_t> index, std::span<const int64_t> shape) {
  int64_t at = 0;
  for (size_t d = 0; d < shape.size(); ++d) at = at * shape[d] + index[d];
  return at;
}

}  // namespace

void slice(KernelCall& call) {
  const auto& start = attrsOf<SliceAttrs>(call.step).start;
  const TensorView &x = call.in[0], &y = call.out[0];
  std::vector<int64_t> at(x.rank());
  forEachIndex(y.shape, [&](std::span<const int64_t> index, int64_t linear) {
    for (size_t d = 0; d < at.size(); ++d) at[d] = index[d] + start[d];
    copyElement(y, linear, x, linearIndex(at, x.shape));
  });
}

void pad(KernelCall& call) {
  const auto& low = attrsOf<PadAttrs>(call.step).low;
  const TensorView &x = call.in[0], &y = call.out[0];
  std::memset(y.data, 0, size_t(y.numel()) * dtypeSize(y.dtype));
  std::vector<int64_t> at(x.rank());
  forEachIndex(x.shape, [&](std::span<const int64_t> index, int64_t linear) {
    for (size_t d = 0; d < at.size(); ++d) at[d] = index[d] + low[d];
    copyElement(y, linearIndex(at, y.shape), x, linear);
  });
}

void concatenate(KernelCall& call) {
  int64_t axis = attrsOf<AxisAttrs>(call.step).axis, offset = 0;
  const TensorView& y = call.out[0];
  for (const TensorView& x : call.in) {
    std::vector<int64_t> at(x.rank());
    forEachIndex(x.shape, [&](std::span<const int64_t> index, int64_t linear) {
      for (size_t d = 0; d < at.size(); ++d) at[d] = index[d] + (int64_t(d) == axis ? offset : 0);
      copyElement(y, linearIndex(at, y.shape), x, linear);
    });
    offset += x.dim(axis);
  }
}

void select(KernelCall& call) {
  visitFloat(call.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < call.out[0].numel(); ++i)
      call.out[0].as<T>()[i] = call.in[0].as<T>()[i] != T(0) ? call.in[1].as<T>()[i] : call.in[2].as<T>()[i];
  });
}

}  // namespace spmd::runtime::reference
