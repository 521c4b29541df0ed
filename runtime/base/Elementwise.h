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
SPMD_EW_MATH(erfc)
#undef SPMD_EW_MATH

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
