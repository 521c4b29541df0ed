// A matmul's bias on the GPU-like backends, as cuBLAS is asked for it: the bias rows written into
// the result first (RowBiasFn), then the GEMM adds its product to them (beta = 1; the
// simulator's stand-in for cuBLAS adds the CPU's product with ProductAddFn, one rounding as
// there). Used by runtime/cuda/Dense.cu and runtime/sim/SimKernels.cpp.
#pragma once

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

// y[r, c] = bias[c] over the result viewed as rows of `cols`.
template <typename T>
struct RowBiasFn {
  const T* bias;
  T* y;
  int64_t cols;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = bias[i % cols]; }
};

// y[n, c, ...] = bias[c] over an NCHW result of `channels` planes of `plane` elements (plane 1:
// channels-last, "nhwc").
template <typename T>
struct ChannelBiasFn {
  const T* bias;
  T* y;
  int64_t channels, plane;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = bias[(i / plane) % channels]; }
};

// y = product + y: a GEMM's alpha = 1, beta = 1.
template <typename T>
struct ProductAddFn {
  const T* product;
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = product[i] + y[i]; }
};

}  // namespace spmd::runtime::kernels
