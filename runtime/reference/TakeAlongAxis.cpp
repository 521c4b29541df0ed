// Reference take_along_axis (input's elements at the indices along one axis, indices checked),
// its backward (each result-gradient element added where its index points, in double), and
// scatter and scatter_reduce (updates written, or folded by max / min, where their indices point,
// in index order).
#include <vector>

#include "runtime/base/NanRules.h"

#include "runtime/program/OpAttrs.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {
namespace {

// [outer, extent, inner] around `axis` of `t`.
struct Around {
  int64_t outer, extent, inner;
};
Around around(const TensorView& t, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int64_t d = axis + 1; d < int64_t(t.rank()); ++d) inner *= t.dim(d);
  return {outer, t.dim(axis), inner};
}

}  // namespace

void take_along_axis(KernelCall& call) {
  const int64_t axis = attrsOf<AxisAttrs>(call.step).axis;
  const Around in = around(call.in[0], axis), at = around(call.in[1], axis);
  const int32_t* indices = call.in[1].as<int32_t>();
  for (int64_t o = 0; o < at.outer; ++o)
    for (int64_t j = 0; j < at.extent; ++j)
      for (int64_t i = 0; i < at.inner; ++i) {
        const int64_t position = (o * at.extent + j) * at.inner + i;
        checkTakeIndex(indices[position], position, in.extent);
        copyElement(call.out[0], position, call.in[0], (o * in.extent + indices[position]) * in.inner + i);
      }
}

void take_along_axis_backward(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t axis = attrsOf<AxisAttrs>(call.step).axis;
    const Around in = around(call.out[0], axis), at = around(call.in[1], axis);
    const int32_t* indices = call.in[1].as<int32_t>();
    std::vector<double> acc(call.out[0].numel(), 0.0);
    for (int64_t o = 0; o < at.outer; ++o)
      for (int64_t j = 0; j < at.extent; ++j)
        for (int64_t i = 0; i < at.inner; ++i) {
          const int64_t position = (o * at.extent + j) * at.inner + i;
          checkTakeIndex(indices[position], position, in.extent);
          acc[(o * in.extent + indices[position]) * in.inner + i] += double(call.in[0].as<T>()[position]);
        }
    for (int64_t k = 0; k < call.out[0].numel(); ++k) call.out[0].as<T>()[k] = static_cast<T>(acc[k]);
  });
}

namespace {

// input copied to the output, then each update, in index order, written (scatter) or folded by
// `fold` into the element its index names.
template <typename Fold>
void scatterInto(KernelCall& call, int64_t axis, Fold fold) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const Around in = around(call.in[0], axis), at = around(call.in[1], axis);
    const int32_t* indices = call.in[1].as<int32_t>();
    const T* updates = call.in[2].as<T>();
    T* out = call.out[0].as<T>();
    for (int64_t k = 0; k < call.out[0].numel(); ++k) out[k] = call.in[0].as<T>()[k];
    for (int64_t o = 0; o < at.outer; ++o)
      for (int64_t j = 0; j < at.extent; ++j)
        for (int64_t i = 0; i < at.inner; ++i) {
          const int64_t position = (o * at.extent + j) * at.inner + i;
          checkTakeIndex(indices[position], position, in.extent);
          T& place = out[(o * in.extent + indices[position]) * in.inner + i];
          place = fold(place, updates[position]);
        }
  });
}

}  // namespace

void scatter(KernelCall& call) {
  scatterInto(call, attrsOf<AxisAttrs>(call.step).axis, [](auto, auto update) { return update; });
}

void scatter_reduce(KernelCall& call) {
  const ScatterReduceAttrs& a = attrsOf<ScatterReduceAttrs>(call.step);
  if (a.reduction == Reduction::Max) scatterInto(call, a.axis, [](auto r, auto u) { return nanMax(r, u); });
  else scatterInto(call, a.axis, [](auto r, auto u) { return nanMin(r, u); });
}

}  // namespace spmd::runtime::reference
