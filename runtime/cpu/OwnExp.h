// e^x in f32 for our own CPU kernels (cpu/Softmax.cpp): basic operations only, in a fixed order,
// so the compiler vectorizes a loop of it (glibc's expf is a call per element, 3.4 ns each on a
// Zen 4 core) and every ISA copy (OwnIsa.h) gives the same bits; within 1 ulp of e^x
// (OwnExpTest). Inf above 88.72, 0 below -103.97 (subnormals rounded once between), NaN kept.
#pragma once

#include <bit>
#include <cstdint>

#include "runtime/cpu/OwnIsa.h"

namespace spmd::runtime::cpu {

// 2^k for k in [-126, 127], from its exponent bits.
SPMD_ISA_BODY float powerOfTwo(int32_t k) { return std::bit_cast<float>(uint32_t(k + 127) << 23); }

SPMD_ISA_BODY float ownExp(float x) {
  // Clamped where e^x is already inf or 0 (a NaN fails both tests and stays NaN).
  x = x > 88.8f ? 88.8f : x;
  x = x < -104.0f ? -104.0f : x;
  // x = n ln2 + r with n = round(x / ln2) (adding 1.5 * 2^23 leaves n in the low bits), r within
  // about ln2 / 2; ln2 split in two (Cody and Waite) so that n * the high part is exact.
  constexpr float kRound = 12582912.0f;
  const float shifted = x * 1.44269504f + kRound;
  const float n = shifted - kRound;
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  // e^r by Cephes' expf polynomial.
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * r * r + r + 1.0f;
  // times 2^n in two exact halves, so that n in [-150, 128] (subnormal and overflowing results)
  // stays in range: the second product rounds once.
  const int32_t k = int32_t(std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRound));
  const int32_t half = k >> 1;
  return er * powerOfTwo(half) * powerOfTwo(k - half);
}

// y[i] = ownExp(x[i]) on the ISA ownIsa() names (for tests: the kernels inline ownExp).
void ownExpValues(const float* x, float* y, int64_t n);

}  // namespace spmd::runtime::cpu
