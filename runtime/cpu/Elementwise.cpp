// CPU elementwise kernels: contiguous loops in the tensor's own type, written for the
// compiler to vectorize, split across OpenMP threads (the pool oneDNN uses) when large. The f32
// rows cpu/OwnGelu.h names run its loops instead (the cpu's own GELU), in blocks across the pool.
#include <algorithm>
#include <cmath>

#include "runtime/base/Elementwise.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnGelu.h"

namespace spmd::runtime::cpu {
namespace {

// Below this many elements a loop runs on one thread (thread start-up would cost more).
constexpr int64_t kParallelMin = 1 << 15;

template <typename Fn>
void binary(KernelCall& call, Fn fn) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict a = call.in[0].as<T>();
    const T* __restrict b = call.in[1].as<T>();
    T* __restrict y = call.out[0].as<T>();
    int64_t n = call.out[0].numel();
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = fn(a[i], b[i]);
  });
}

template <typename Fn>
void unary(KernelCall& call, Fn fn) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict x = call.in[0].as<T>();
    T* __restrict y = call.out[0].as<T>();
    int64_t n = call.out[0].numel();
#pragma omp parallel for simd if (n >= kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i]);
  });
}

// f32 through cpu/OwnGelu.h's loop for Functor, blocks of 4096 values across the pool.
template <class Functor>
void ownF32(KernelCall& call) {
  const float* a = call.in[0].as<float>();
  const float* b = Functor::arity() == 2 ? call.in[1].as<float>() : nullptr;
  float* y = call.out[0].as<float>();
  const int64_t n = call.out[0].numel(), block = 4096, blocks = (n + block - 1) / block;
#pragma omp parallel for if (n >= kParallelMin) schedule(static)
  for (int64_t k = 0; k < blocks; ++k)
    ownF32Values<Functor>(a + k * block, b ? b + k * block : nullptr, y + k * block, std::min(block, n - k * block));
}

}  // namespace

// One kernel per row of the elementwise table (runtime/base/ElementwiseTable.h).
#define SPMD_CPU_KERNEL(name, Functor, arity, ...)                                    \
  void name(KernelCall& c) {                                                          \
    if constexpr (kOwnF32<ew::Functor>)                                               \
      if (c.in[0].dtype == DType::f32) return ownF32<ew::Functor>(c);                 \
    if constexpr (arity == 2)                                                         \
      binary(c, [](auto a, auto b) { return ew::Functor::apply(a, b); });             \
    else                                                                              \
      unary(c, [](auto a) { return ew::Functor::apply(a, a); });                      \
  }
SPMD_ELEMENTWISE_OPS(SPMD_CPU_KERNEL)
#undef SPMD_CPU_KERNEL

}  // namespace spmd::runtime::cpu
