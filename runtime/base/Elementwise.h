// The elementwise ops of runtime/base/ElementwiseTable.h as functors, one per row:
// ew::Exp::apply(a, b) evaluates the row's formula in T (b is ignored by unary ops). The same
// text compiles on the host (reference and CPU kernels, the simulator), with nvcc (CUDA kernels)
// and with NVRTC (generated fused kernels, runtime/kernels/FusedSource.cpp embeds this file, the
// table and NanRules.h), so a formula cannot differ between backends.
#pragma once

#if !defined(__CUDACC_RTC__)
#include <cmath>

#include "runtime/base/ElementwiseTable.h"
#include "runtime/base/NanRules.h"
#endif

namespace spmd::runtime::ew {

// The math functions in T, expOf(a) etc.: float calls the float function (expf) on every compiler.
#if defined(__CUDA_ARCH__)
#define SPMD_EW_MATH(fn)                                                    \
  template <typename T>                                                     \
  SPMD_HOST_DEVICE inline T fn##Of(T a) {                                   \
    if constexpr (sizeof(T) == 4) return ::fn##f(a); else return ::fn(a);   \
  }
#else
#define SPMD_EW_MATH(fn)                                                    \
  template <typename T>                                                     \
  SPMD_HOST_DEVICE inline T fn##Of(T a) { return std::fn(a); }
#endif
SPMD_EW_MATH(exp)
SPMD_EW_MATH(log)
SPMD_EW_MATH(sqrt)
SPMD_EW_MATH(tanh)
SPMD_EW_MATH(sin)
SPMD_EW_MATH(cos)
SPMD_EW_MATH(log1p)
SPMD_EW_MATH(expm1)
SPMD_EW_MATH(erf)
SPMD_EW_MATH(erfc)
SPMD_EW_MATH(floor)
SPMD_EW_MATH(ceil)
SPMD_EW_MATH(rint)  // the current rounding mode: to nearest, ties to even
#undef SPMD_EW_MATH

template <typename T>
SPMD_HOST_DEVICE inline T powOf(T a, T b) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == 4) return ::powf(a, b); else return ::pow(a, b);
#else
  return std::pow(a, b);
#endif
}

// The inverse error function, erfinv(erf(x)) = x: CUDA's own on a GPU. On the host (C++ has
// none, and Boost.Math's cannot come: the simulator's host builds of generated kernels include
// nothing but <cmath>) in double, then rounded: a first guess, then Halley steps, each tripling
// the digits. |y| < 1/2: the Taylor guess and three steps on erf(x) - y, exact near 0; else on the
// tail q = 1 - |y| (exact there): Winitzki's guess and four steps on q - erfc(x) (the guess is
// coarser far out), which keeps the tail's digits down to q = 1e-307. Within 0.71 ulp of the exact
// value in double over both ranges (scanned against long double). erfinv(+-1) = +-inf, NaN beyond.
#if defined(__CUDA_ARCH__)
template <typename T>
SPMD_HOST_DEVICE inline T erfinvOf(T y) {
  if constexpr (sizeof(T) == 4) return ::erfinvf(y); else return ::erfinv(y);
}
#else
// x >= 0 with erfc(x) = q, for q in (0, 1/2] (the normal quantile's tails too: frontend/Init.cpp).
inline double erfcinvTail(double q) {
  const double kWinitzki = 0.147, kTwoOverPiA = 2 / (3.14159265358979323846 * kWinitzki);
  const double l = std::log(q * (2 - q)), b = kTwoOverPiA + l / 2;  // l = log(1 - y^2)
  double x = std::sqrt(std::sqrt(b * b - l / kWinitzki) - b);
  for (int step = 0; step < 4; ++step) {
    // f / f' (f' = 2/sqrt(pi) e^-x^2), e^(x^2) in two halves: whole, it overflows for q below 1e-308.
    const double half = std::exp(x * x / 2), u = (q - std::erfc(x)) * half * 0.88622692545275801365 * half;
    x -= u / (1 + x * u);
  }
  return x;
}
// erfinv(y) for |y| < 1/2.
inline double erfinvCentral(double y) {
  double x = y * 0.88622692545275801365 * (1 + 0.26179938779914943654 * y * y);  // sqrt(pi)/2 y (1 + pi/12 y^2)
  for (int step = 0; step < 3; ++step) {
    const double u = (std::erf(x) - y) * 0.88622692545275801365 * std::exp(x * x);
    x -= u / (1 + x * u);
  }
  return x;
}
template <typename T>
inline T erfinvOf(T y) {
  const double v = double(y), a = std::fabs(v);
  if (!(a < 1)) return a == 1 ? T(v * HUGE_VAL) : T(NAN);  // +-inf at +-1; NaN beyond and for NaN
  if (a < 0.5) return T(erfinvCentral(v));
  const double x = erfcinvTail(1 - a);
  return T(v < 0 ? -x : x);
}
#endif

// GELU(x) = x * Phi(x), Phi the standard normal CDF; its derivative Phi(x) + x * phi(x).
// Phi(x) = erfc(-x / sqrt 2) / 2: 1 + erf(x / sqrt 2) would cancel to 0 for x below about -6
// (f32), losing every digit of the tail that the exact value still has.
template <typename T>
SPMD_HOST_DEVICE inline T normalCdfOf(T x) {
  return T(0.5) * erfcOf(x * T(-0.70710678118654752440));
}
template <typename T>
SPMD_HOST_DEVICE inline T geluOf(T x) {
  return x * normalCdfOf(x);
}
template <typename T>
SPMD_HOST_DEVICE inline T geluGradOf(T x) {
  return normalCdfOf(x) + x * expOf(T(-0.5) * x * x) * T(0.39894228040143267794);
}
// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0 so that e^-x cannot overflow to infinity while
// the result is still a (subnormal) number.
template <typename T>
SPMD_HOST_DEVICE inline T sigmoidOf(T x) {
  if (x >= T(0)) return T(1) / (T(1) + expOf(-x));
  T e = expOf(x);
  return e / (T(1) + e);
}

#define SPMD_EW_FUNCTOR(name, Functor, arity_, formula)                         \
  struct Functor {                                                              \
    static constexpr int arity() { return arity_; }                             \
    template <typename T>                                                       \
    SPMD_HOST_DEVICE static T apply(T a, [[maybe_unused]] T b) { return formula; } \
  };
SPMD_ELEMENTWISE_OPS(SPMD_EW_FUNCTOR)
#undef SPMD_EW_FUNCTOR

}  // namespace spmd::runtime::ew
