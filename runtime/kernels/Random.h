// random_uniform and random_fold_in for the CUDA backend, the simulator and the CPU backend:
// one functor call per output element, each a pure function of the key and its index
// (runtime/base/Philox.h), so every backend gives the same bits.
#pragma once

#include "runtime/base/Philox.h"
#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

template <typename T>
struct UniformFn {
  const int32_t* key;
  T* out;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    uint32_t k0 = uint32_t(key[0]), k1 = uint32_t(key[1]);
    if constexpr (sizeof(T) == 8) out[i] = philox::uniformF64(k0, k1, uint64_t(i));
    else out[i] = philox::uniformF32(k0, k1, uint64_t(i));
  }
};

struct FoldInFn {
  const int32_t* key;
  const int32_t* data;
  int32_t* out;
  SPMD_HOST_DEVICE void operator()(int64_t) const {
    uint32_t k[2] = {uint32_t(key[0]), uint32_t(key[1])}, derived[2];
    philox::foldIn(k, uint32_t(data[0]), derived);
    out[0] = int32_t(derived[0]);
    out[1] = int32_t(derived[1]);
  }
};

template <class Api>
void random_uniform(KernelCall& call) {
  visitFloat(call.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), UniformFn<T>{call.in[0].as<int32_t>(), call.out[0].as<T>()});
  });
}

template <class Api>
void random_fold_in(KernelCall& call) {
  Api::forEach(call, 1, FoldInFn{call.in[0].as<int32_t>(), call.in[1].as<int32_t>(), call.out[0].as<int32_t>()});
}

#define SPMD_LIBRARY_RANDOM_OPS(X) X(random_uniform) X(random_fold_in)

}  // namespace spmd::runtime::kernels
