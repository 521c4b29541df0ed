// A matmul's bias on the GPU-like backends, as cuBLAS is asked for it: the bias rows written into
// the result first (RowBiasFn), then the GEMM adds its product to them (beta = 1; the
// simulator's stand-in for cuBLAS adds the CPU's product with ProductAddFn, one rounding as
// there). Used by runtime/cuda/Dense.cu and runtime/sim/SimKernels.cpp. Also a convolution's
// relu where the library computing it does not fuse one (ReluInPlaceFn: cuda, cpu).
#pragma once

#include "runtime/base/BFloat16.h"
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

// y = max(0, y) in place, by the relu op's NaN rules (runtime/base/NanRules.h): a conv2d's relu
// (spmd-fuse-relu's form) after a library convolution that did not apply it. A bf16 value goes
// through f32 and back, exactly.
template <typename T>
struct ReluInPlaceFn {
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = reluOf(y[i]); }
};
template <>
struct ReluInPlaceFn<bf16> {
  bf16* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = toBf16(reluOf(fromBf16(y[i]))); }
};

// y = product + y: a GEMM's alpha = 1, beta = 1.
template <typename T>
struct ProductAddFn {
  const T* product;
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = product[i] + y[i]; }
};

}  // namespace spmd::runtime::kernels
