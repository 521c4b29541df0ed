// Elementwise kernels of the CUDA backend and the simulator: one functor per element, in the
// tensor's type, with the formulas of the CPU backend (runtime/cpu/Elementwise.cpp).
#pragma once

#include <cmath>

#include "runtime/cuda/kernels/Common.h"

namespace spmd::runtime::gpu {

template <typename T, typename Op>
struct Binary {
  const T* a;
  const T* b;
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = Op::apply(a[i], b[i]); }
};

template <typename T, typename Op>
struct Unary {
  const T* x;
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = Op::apply(x[i]); }
};

#define SPMD_GPU_OP2(Name, expr) \
  struct Name { template <typename T> SPMD_HOST_DEVICE static T apply(T a, T b) { return expr; } };
#define SPMD_GPU_OP1(Name, expr) \
  struct Name { template <typename T> SPMD_HOST_DEVICE static T apply(T a) { return expr; } };
SPMD_GPU_OP2(AddOp, a + b)
SPMD_GPU_OP2(SubOp, a - b)
SPMD_GPU_OP2(MulOp, a * b)
SPMD_GPU_OP2(DivOp, a / b)
SPMD_GPU_OP2(MaxOp, nanMax(a, b))
SPMD_GPU_OP2(GreaterEqualOp, a >= b ? T(1) : T(0))
SPMD_GPU_OP2(ReluBackwardOp, reluGradOf(a, b))  // a: result gradient, b: relu result
SPMD_GPU_OP1(NegOp, -a)
SPMD_GPU_OP1(ExpOp, ::exp(a))
SPMD_GPU_OP1(LogOp, ::log(a))
SPMD_GPU_OP1(SqrtOp, ::sqrt(a))
SPMD_GPU_OP1(ReluOp, reluOf(a))
#undef SPMD_GPU_OP2
#undef SPMD_GPU_OP1

template <class Api, typename Op>
void binary(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), Binary<T, Op>{call.in[0].as<T>(), call.in[1].as<T>(), call.out[0].as<T>()});
  });
}

template <class Api, typename Op>
void unary(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), Unary<T, Op>{call.in[0].as<T>(), call.out[0].as<T>()});
  });
}

// X(op name, functor, binary or unary)
#define SPMD_GPU_ELEMENTWISE_OPS(X)                                                              \
  X(add, AddOp, binary) X(sub, SubOp, binary) X(mul, MulOp, binary) X(div, DivOp, binary)       \
  X(max, MaxOp, binary) X(greater_equal, GreaterEqualOp, binary)                                \
  X(relu_backward, ReluBackwardOp, binary) X(neg, NegOp, unary) X(exp, ExpOp, unary)            \
  X(log, LogOp, unary) X(sqrt, SqrtOp, unary) X(relu, ReluOp, unary)

}  // namespace spmd::runtime::gpu
