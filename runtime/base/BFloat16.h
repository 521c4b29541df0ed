// bfloat16 (bf16): the upper 16 bits of an IEEE f32 (8 exponent bits, 7 mantissa bits). The
// runtime stores bf16 tensors as these bits and computes on them in f32 (the compiler widens
// every bf16 op, passes/WidenBf16.cpp); this is the one rounding f32 -> bf16 every backend uses:
// to nearest, ties to even, as PyTorch's and JAX's conversions do; a NaN stays a (quiet) NaN,
// with its sign; infinities and overflow to infinity as in IEEE.
#pragma once

#if !defined(__CUDACC_RTC__)  // NVRTC (fused kernels, runtime/kernels/FusedSource.cpp embeds this file)
#include <cstdint>
#include <cstring>

#include "runtime/base/NanRules.h"
#endif

namespace spmd {

struct bf16 {
  uint16_t bits = 0;
};

SPMD_HOST_DEVICE inline uint32_t floatBits(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
#endif
}

SPMD_HOST_DEVICE inline float bitsFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float v;
  std::memcpy(&v, &u, 4);
  return v;
#endif
}

// f32 -> bf16, to nearest, ties to even. Without a branch (the NaN case is a select), so that
// the loops of the CPU's converts and fused bodies vectorize.
SPMD_HOST_DEVICE inline bf16 toBf16(float v) {
  const uint32_t u = floatBits(v);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet = (u >> 16) | 0x0040u;  // NaN: keep it quiet, with its sign
  return bf16{uint16_t((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded)};
}

// bf16 -> f32: exact.
SPMD_HOST_DEVICE inline float fromBf16(bf16 v) { return bitsFloat(uint32_t(v.bits) << 16); }

// f32 -> the nearest bf16 value, as an f32 (what a round trip through bf16 leaves).
SPMD_HOST_DEVICE inline float roundToBf16(float v) { return fromBf16(toBf16(v)); }

}  // namespace spmd
