// Shape kernels of the CUDA backend and the simulator: broadcast_in_dim and transpose as one
// strided gather (result index -> source offset), reshape as a device-to-device copy. Any
// element type (moved by size).
#pragma once

#include <vector>

#include "runtime/kernels/Common.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

constexpr int kMaxRank = 8;

struct Gather {
  int rank;
  int64_t dims[kMaxRank];     // result shape
  int64_t strides[kMaxRank];  // source element stride per result dim (0: broadcast)
};

template <typename T>
struct GatherFn {
  const T* x;
  T* y;
  Gather g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t rest = i, from = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      from += (rest % g.dims[d]) * g.strides[d];
      rest /= g.dims[d];
    }
    y[i] = x[from];
  }
};

inline Gather resultShape(const TensorView& y) {
  if (y.rank() > static_cast<size_t>(kMaxRank))
    throw Error("GPU shape kernels support rank <= 8, got rank " + std::to_string(y.rank()));
  Gather g{static_cast<int>(y.rank()), {}, {}};
  for (size_t d = 0; d < y.rank(); ++d) g.dims[d] = y.dim(d);
  return g;
}

inline std::vector<int64_t> rowMajorStrides(const TensorView& x) {
  std::vector<int64_t> strides(x.rank(), 1);
  for (size_t d = x.rank(); d-- > 1;) strides[d - 1] = strides[d] * x.dim(d);
  return strides;
}

template <class Api>
void gather(KernelCall& call, const Gather& g) {
  int64_t n = call.out[0].numel();
  if (dtypeSize(call.in[0].dtype) == 8)
    Api::forEach(call, n, GatherFn<int64_t>{call.in[0].as<int64_t>(), call.out[0].as<int64_t>(), g});
  else
    Api::forEach(call, n, GatherFn<int32_t>{call.in[0].as<int32_t>(), call.out[0].as<int32_t>(), g});
}

template <class Api>
void broadcast_in_dim(KernelCall& call) {
  const auto& dims = attrsOf<DimsAttrs>(call.step).dims;
  Gather g = resultShape(call.out[0]);
  std::vector<int64_t> strides = rowMajorStrides(call.in[0]);
  for (size_t i = 0; i < dims.size(); ++i)
    if (call.in[0].dim(i) != 1) g.strides[dims[i]] = strides[i];
  gather<Api>(call, g);
}

template <class Api>
void transpose(KernelCall& call) {
  const auto& perm = attrsOf<PermAttrs>(call.step).perm;
  Gather g = resultShape(call.out[0]);
  std::vector<int64_t> strides = rowMajorStrides(call.in[0]);
  for (size_t i = 0; i < perm.size(); ++i) g.strides[i] = strides[perm[i]];
  gather<Api>(call, g);
}

template <class Api>
void reshape(KernelCall& call) {
  Api::copy(call, call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(call.in[0].dtype));
}

#define SPMD_LIBRARY_SHAPE_OPS(X) X(broadcast_in_dim) X(transpose) X(reshape)

}  // namespace spmd::runtime::kernels
