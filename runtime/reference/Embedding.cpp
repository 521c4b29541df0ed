// Reference embedding (row lookup, ids checked), its backward (ids checked, each result-gradient
// row added into its id's row, in double), and segment_reduce (data's rows folded by max / min into their
// ids' rows, in row order, from -inf / +inf).
#include <cmath>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/program/OpAttrs.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {

void embedding(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t rows = call.in[0].dim(0), dim = call.in[0].dim(1);
    const int32_t* ids = call.in[1].as<int32_t>();
    for (int64_t p = 0; p < call.in[1].numel(); ++p) {
      checkId(ids[p], p, rows);
      for (int64_t d = 0; d < dim; ++d) call.out[0].as<T>()[p * dim + d] = call.in[0].as<T>()[ids[p] * dim + d];
    }
  });
}

void embedding_backward(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& table = call.out[0];
    int64_t rows = table.dim(0), dim = table.dim(1);
    std::vector<double> acc(table.numel(), 0.0);
    const int32_t* ids = call.in[1].as<int32_t>();
    for (int64_t p = 0; p < call.in[1].numel(); ++p) {
      checkTakeIndex(ids[p], p, rows);  // spmd::segmentSum's only check (an embedding's ids passed its lookup's)
      for (int64_t d = 0; d < dim; ++d) acc[ids[p] * dim + d] += double(call.in[0].as<T>()[p * dim + d]);
    }
    for (int64_t i = 0; i < table.numel(); ++i) table.as<T>()[i] = static_cast<T>(acc[i]);
  });
}

void segment_reduce(KernelCall& call) {
  const bool max = attrsOf<SegmentAttrs>(call.step).reduction == Reduction::Max;
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& result = call.out[0];
    const int64_t rows = result.dim(0), dim = result.dim(1);
    T* out = result.as<T>();
    for (int64_t i = 0; i < result.numel(); ++i) out[i] = static_cast<T>(max ? -INFINITY : INFINITY);
    const int32_t* ids = call.in[1].as<int32_t>();
    for (int64_t p = 0; p < call.in[1].numel(); ++p) {
      checkTakeIndex(ids[p], p, rows);
      for (int64_t d = 0; d < dim; ++d) {
        T& r = out[ids[p] * dim + d];
        const T v = call.in[0].as<T>()[p * dim + d];
        r = max ? nanMax(r, v) : nanMin(r, v);
      }
    }
  });
}

}  // namespace spmd::runtime::reference
