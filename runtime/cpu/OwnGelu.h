// GELU and its derivative in f32 for our own CPU kernels: each is computed in double from basic
// operations and rounded once, so a loop of it vectorizes (glibc's erfcf and expf are a call per
// element), every ISA copy (OwnIsa.h) gives the same bits (the polynomials' steps are explicit
// fused multiply-adds, one rounding each: AVX2's and AVX-512's instruction, the portable copy's
// correctly rounded libm fma; 1.4x faster on Zen 2 than a multiply and an add), and the result is within about half
// an ulp of the exact value (OwnIsaTest), tails included: the formulas of runtime/base/Elementwise.h
// in f32 round x / sqrt 2 first and cost up to hundreds of ulps where erfc is small.
// cpu/Elementwise.cpp and cpu/Fused.cpp both call these, so fusing a gelu does not change its bits.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "runtime/base/Elementwise.h"
#include "runtime/cpu/OwnIsa.h"

namespace spmd::runtime::cpu {

// e^y in double to about 1e-11 relative, enough for a result rounded to f32: 0 below -708 and
// inf above 709 (where a factor of e^y in an f32 result makes it 0 or inf), NaN kept.
// y = n ln2 + r, ln2 split so that n * its high part is exact, e^r by its Taylor series to r^9
// (|r| <= ln2 / 2), times 2^n from its exponent bits.
SPMD_ISA_BODY double expForF32(double x) {
  double y = x < -708.0 ? -708.0 : x;
  y = y > 709.0 ? 709.0 : y;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double shifted = y * 1.4426950408889634 + kRound;
  const double n = shifted - kRound;
  const double r = (y - n * 0.693147180369123816490) - n * 1.90821492927058770002e-10;
  double p = 1.0 / 362880;
  p = __builtin_fma(p, r, 1.0 / 40320);
  p = __builtin_fma(p, r, 1.0 / 5040);
  p = __builtin_fma(p, r, 1.0 / 720);
  p = __builtin_fma(p, r, 1.0 / 120);
  p = __builtin_fma(p, r, 1.0 / 24);
  p = __builtin_fma(p, r, 1.0 / 6);
  p = __builtin_fma(p, r, 0.5);
  p = __builtin_fma(p, r, 1.0);
  p = __builtin_fma(p, r, 1.0);
  const int64_t k = int64_t(std::bit_cast<uint64_t>(shifted) - std::bit_cast<uint64_t>(kRound));
  const double e = p * std::bit_cast<double>(uint64_t(k + 1023) << 52);
  return x < -708.0 ? 0.0 : x > 709.0 ? double(INFINITY) : e;
}

// erfc(x) in double to about 1e-9 relative (for a result rounded to f32), NaN kept. For a = |x|:
// erfc(a) = e^(-a^2) h(a) / (1 + 2a), where h = (1 + 2a) e^(a^2) erfc(a) rises from 1 to at most
// 1.29 and tends to 2 / sqrt(pi); 1 + h is a degree-12 polynomial in t = (a - 3) / (a + 3)
// (scripts/fit_erfc.py fits it: 6.3e-10 from h over a in [0, 26.5]). Beyond 26.5 erfc(a) is
// taken as 0 (it is below 1e-306, and a factor of it in an f32 result makes that 0: gelu(-inf)
// is then -inf * 0, NaN, as the formula's is); erfc(-a) = 2 - erfc(a).
SPMD_ISA_BODY double erfcForF32(double x) {
  const double abs = x < 0 ? -x : x;
  const double a = abs > 26.5 ? 26.5 : abs;
  // t and 1 / (1 + 2a) from one division (a vector's divisions cost more than the rest).
  const double twice = 1.0 + 2.0 * a, inverse = 1.0 / ((a + 3.0) * twice);
  const double t = (a - 3.0) * twice * inverse;
  double p = 1.823015383317075e-05;
  p = __builtin_fma(p, t, 9.2988628138948853e-05);
  p = __builtin_fma(p, t, -0.00013268126598682366);
  p = __builtin_fma(p, t, -0.000757446901160236);
  p = __builtin_fma(p, t, 0.001909495977131396);
  p = __builtin_fma(p, t, 0.0025215753687906858);
  p = __builtin_fma(p, t, -0.0237777480818499);
  p = __builtin_fma(p, t, 0.068309409139585414);
  p = __builtin_fma(p, t, -0.11927252667914773);
  p = __builtin_fma(p, t, 0.12964504712016153);
  p = __builtin_fma(p, t, -0.047562359538876872);
  p = __builtin_fma(p, t, -0.13562110328935592);
  p = __builtin_fma(p, t, 0.2530080588705334);
  const double tail = abs > 26.5 ? 0.0 : (1.0 + p) * ((a + 3.0) * inverse) * expForF32(-(a * a));
  return x < 0 ? 2.0 - tail : tail;
}

constexpr double kRootHalf = 0.70710678118654752440;     // 1 / sqrt 2
constexpr double kRootTwoPiInv = 0.39894228040143267794; // 1 / sqrt(2 pi)

// gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2. A NaN x is the result as it is (the
// vector copies would otherwise give it another sign).
SPMD_ISA_BODY float ownGelu(float x) {
  const double w = x;
  const float y = float(w * (0.5 * erfcForF32(w * -kRootHalf)));
  return x == x ? y : x;
}

// g * gelu'(x) = g (Phi(x) + x phi(x)), phi(x) = e^(-x^2 / 2) / sqrt(2 pi) (x^2 is exact in double).
SPMD_ISA_BODY float ownGeluBackward(float g, float x) {
  const double w = x;
  return float(double(g) * (0.5 * erfcForF32(w * -kRootHalf) + w * expForF32(-0.5 * (w * w)) * kRootTwoPiInv));
}

// The loops over n values on the ISA ownIsa() names (cpu/OwnGelu.cpp).
void ownGeluValues(const float* x, float* y, int64_t n);
void ownGeluBackwardValues(const float* g, const float* x, float* y, int64_t n);
// erfc(x) rounded to f32, a NaN x as it is (for tests).
void ownErfcValues(const float* x, float* y, int64_t n);

// The rows of the elementwise table (runtime/base/ElementwiseTable.h) whose f32 CPU kernels and
// fused-body loops run these instead of the shared formula, and the call for one of them
// (operands a and b as the table's, b unused by gelu).
template <class Functor>
inline constexpr bool kOwnF32 = std::is_same_v<Functor, ew::Gelu> || std::is_same_v<Functor, ew::GeluBackward>;
template <class Functor>
void ownF32Values(const float* a, const float* b, float* y, int64_t n) {
  static_assert(kOwnF32<Functor>);
  if constexpr (std::is_same_v<Functor, ew::Gelu>) ownGeluValues(a, y, n);
  else ownGeluBackwardValues(a, b, y, n);
}

}  // namespace spmd::runtime::cpu
