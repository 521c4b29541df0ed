// The ops with bf16 kernels: every backend runs them on bf16 operands (bf16 in and out, f32
// accumulation, each result rounded once, to nearest even) when the compiler keeps them in bf16.
// spmd-widen-bf16's native-kernels option keeps them (pmap sets it where the backend's
// Driver::bf16Kernels says its library has such kernels: oneDNN on AVX512-BF16 or AMX, cuDNN and
// cuBLAS on sm_80 and later); every other bf16 op, and these elsewhere, run in f32 between
// roundings. A backend without a library kernel runs its f32 kernel between roundings
// (runtime/device/WidenedBf16.h), so a Program compiled either way runs on every backend.
#pragma once

#include <string_view>

#define SPMD_BF16_KERNEL_OPS(X) X(conv2d) X(conv2d_backward_data) X(conv2d_backward_filter) X(matmul)

namespace spmd::runtime {

inline bool hasBf16Kernel(std::string_view op) {
#define SPMD_BF16_KERNEL_IS(name) \
  if (op == #name) return true;
  SPMD_BF16_KERNEL_OPS(SPMD_BF16_KERNEL_IS)
#undef SPMD_BF16_KERNEL_IS
  return false;
}

}  // namespace spmd::runtime
