// The CUDA backend's own kernels, each a host function that enqueues work on the device's stream:
// X(name, source) per op the backend hands to a library or to its own code instead of the kernel
// library (runtime/kernels/Library.h); every other op runs the library's kernel.
#pragma once

#include "runtime/device/Kernel.h"

#define SPMD_CUDA_OPS(X)                                                   \
  X(conv2d, "cuDNN convolution (cuda/Conv.cpp)")                           \
  X(conv2d_backward_data, "cuDNN convolution backward (cuda/Conv.cpp)")    \
  X(conv2d_backward_filter, "cuDNN convolution backward (cuda/Conv.cpp)")  \
  X(matmul, "cuBLAS (cuda/Dense.cu)")                                      \
  X(fused, "NVRTC-compiled fused kernels (cuda/Fused.cpp)")                \
  X(relayout, "refuses: cuda keeps every tensor plain (cuda/KernelTable.cpp)")

namespace spmd::runtime::cuda {

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_CUDA_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

// y[n, c, h, w] = bias[c] (cuda/Dense.cu): a bf16 convolution's bias, which cuDNN then adds its
// result to (beta = 1), one rounding as on the other backends.
void writeChannelBias(KernelCall& call, const TensorView& bias, const TensorView& y);

// Enters the kernel library compiled by nvcc (runtime/cuda/Library.cu) into `table`.
void addLibrary(KernelTable& table);

}  // namespace spmd::runtime::cuda
