// The one table of elementwise ops. Every kernel (reference, CPU, CUDA and the simulator), every
// fused-body evaluator (reference, CPU, and the CUDA source generator), the fused body's op kinds
// and the compiler's list of fusable ops expand it, so a new elementwise op is one row here, its
// ODS line (ir/SpmdOps.td, class Functor##Op), its VJP rule (ir/SpmdVjpRules.cpp) and its DSL
// function (frontend/Ops.h).
//
// X(name, Functor, arity, formula): `name` is the dialect op's name (and the kernel's and the
// fused body's); `formula` is an expression of type T in `a` (and `b` for binary ops) that may use
// the operators, T(literal), and the functions of runtime/base/Elementwise.h (nanMax, nanMin, reluOf, absOf,
// reluGradOf, expOf, logOf, sqrtOf, powOf, floorOf, ceilOf, rintOf, tanhOf, sinOf, cosOf, log1pOf, expm1Of, erfOf, erfinvOf, sigmoidOf, geluOf, geluGradOf), so it means the same in host
// and device code.
// No includes: the CUDA fused-kernel generator hands this file to NVRTC as it is.
#pragma once

#define SPMD_ELEMENTWISE_OPS(X)                                                               \
  X(add, Add, 2, a + b)                                                                       \
  X(sub, Sub, 2, a - b)                                                                       \
  X(mul, Mul, 2, a * b)                                                                       \
  X(div, Div, 2, a / b)                                                                       \
  X(pow, Pow, 2, powOf(a, b)) /* C's pow: NaN for a negative base and a non-integer exponent */ \
  X(max, Max, 2, nanMax(a, b))                                                                \
  X(min, Min, 2, nanMin(a, b))                                                                \
  X(greater_equal, GreaterEqual, 2, a >= b ? T(1) : T(0))                                     \
  X(greater, Greater, 2, a > b ? T(1) : T(0))                                                 \
  X(less_equal, LessEqual, 2, a <= b ? T(1) : T(0))                                           \
  X(less, Less, 2, a < b ? T(1) : T(0))                                                       \
  X(equal, Equal, 2, a == b ? T(1) : T(0))                                                    \
  X(not_equal, NotEqual, 2, a != b ? T(1) : T(0))                                             \
  X(relu_backward, ReluBackward, 2, reluGradOf(a, b)) /* a: result gradient, b: relu result */ \
  X(gelu_backward, GeluBackward, 2, a * geluGradOf(b)) /* a: result gradient, b: gelu input */ \
  X(neg, Neg, 1, -a)                                                                          \
  X(abs, Abs, 1, absOf(a))                                                                    \
  X(exp, Exp, 1, expOf(a))                                                                    \
  X(log, Log, 1, logOf(a))                                                                    \
  X(sqrt, Sqrt, 1, sqrtOf(a))                                                                 \
  X(relu, Relu, 1, reluOf(a))                                                                 \
  X(tanh, Tanh, 1, tanhOf(a))                                                                 \
  X(sigmoid, Sigmoid, 1, sigmoidOf(a))                                                         \
  X(gelu, Gelu, 1, geluOf(a)) /* exact (erf) GELU, PyTorch's default */                       \
  X(sin, Sin, 1, sinOf(a))                                                                    \
  X(cos, Cos, 1, cosOf(a))                                                                    \
  X(log1p, Log1p, 1, log1pOf(a))                                                              \
  X(expm1, Expm1, 1, expm1Of(a))                                                              \
  X(erf, Erf, 1, erfOf(a))                                                                    \
  X(erfinv, Erfinv, 1, erfinvOf(a)) /* erfinv(erf(x)) = x on (-1, 1); +-inf at +-1 */    \
  X(floor, Floor, 1, floorOf(a))                                                              \
  X(ceil, Ceil, 1, ceilOf(a))                                                                \
  X(round, Round, 1, rintOf(a)) /* to nearest, ties to even: torch.round, jnp.round */       \
  X(sign, Sign, 1, a > T(0) ? T(1) : (a < T(0) ? T(-1) : a)) /* NaN and +-0 kept, as jax */
