// Elementwise kernels of the CUDA backend and the simulator: the functors of
// runtime/base/Elementwise.h (the formulas every backend shares) per element, in the tensor's type.
#pragma once

#include <cmath>

#include "runtime/base/Elementwise.h"
#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

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
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = Op::apply(x[i], x[i]); }
};

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

// One kernel per row of the elementwise table: X(name, Functor, arity, formula).
template <class Api, typename Functor>
void elementwise(KernelCall& call) {
  if constexpr (Functor::arity() == 2)
    binary<Api, Functor>(call);
  else
    unary<Api, Functor>(call);
}

}  // namespace spmd::runtime::kernels
