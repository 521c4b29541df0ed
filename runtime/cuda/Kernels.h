// The CUDA backend's own kernels, each a host function that enqueues work on the device's stream:
// X(name, source) per op the backend hands to a library or to its own code instead of the kernel
// library (runtime/kernels/Library.h); every other op runs the library's kernel.
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::kernels {
struct GemmArgs;
}

#define SPMD_CUDA_OPS(X)                                                   \
  X(conv2d, "cuDNN convolution (cuda/Conv.cpp)")                           \
  X(conv2d_backward_data, "cuDNN convolution backward (cuda/Conv.cpp)")    \
  X(conv2d_backward_filter, "cuDNN convolution backward (cuda/Conv.cpp)")  \
  X(matmul, "cuBLAS (cuda/Dense.cu)")                                      \
  X(fused, "NVRTC-compiled fused kernels (cuda/Fused.cpp)")                \
  X(custom_call, "the user's CUDA kernel compiled by NVRTC (cuda/CustomCall.cpp)")

namespace spmd::runtime::cuda {

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_CUDA_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

// y[n, c, h, w] = bias[c] (cuda/Dense.cu): a bf16 convolution's bias, which cuDNN then adds its
// result to (beta = 1), one rounding as on the other backends.
void writeChannelBias(KernelCall& call, const TensorView& bias, const TensorView& y);
// A convolution (either backward op too) or matmul over nothing (kernels/EmptySums.h, in
// cuda/Dense.cu): true where its outputs are written (nothing, or zeros plus the bias), before any
// cuDNN or cuBLAS call, which refuse zero extents.
bool emptySums(KernelCall& call);
// y = max(0, y) in place (cuda/Dense.cu; kernels::ReluInPlaceFn): a conv2d's relu where cuDNN's
// graph does not fuse it.
void reluInPlace(KernelCall& call, const TensorView& y);

// Row-major C = op(A) op(B) in f32 or f64 through cuBLAS (cuda/Dense.cu; TF32 only with
// SPMD_ALLOW_TF32=1), or bf16 operands into f32 sums (tensor cores), queued on the step's stream.
void rowMajorGemm(KernelCall& call, const kernels::GemmArgs& gemm);

// The convolution variant "gemm" (runtime/kernels/ConvGemm.h through rowMajorGemm;
// cuda/ConvGemm.cu), beside cuDNN's algorithms in cuda/Conv.cpp's choice:
// whether it computes the step (f32, f64 or bf16, 32-bit indices, one image's columns within
// kConvGemmScratchBytes), with the scratch it needs (the batch in chunks of at most that);
bool convGemmRuns(const KernelCall& call, size_t* scratchBytes);
// the step queued (its scratch the device's workspace);
void convGemm(KernelCall& call);
// its seconds a run on the step's buffers (which it overwrites): the least of 3 after a warm-up.
double timeConvGemm(KernelCall& call);
// The most scratch a chunk of the batch takes (its images' columns and channel-major result).
constexpr size_t kConvGemmScratchBytes = size_t(256) << 20;

// Enters the kernel library compiled by nvcc (runtime/cuda/Library.cu) into `table`.
void addLibrary(KernelTable& table);

}  // namespace spmd::runtime::cuda
