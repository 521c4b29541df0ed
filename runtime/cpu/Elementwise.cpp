// CPU elementwise kernels: contiguous loops in the tensor's own type, written for the
// compiler to vectorize, split across OpenMP threads (the pool oneDNN uses) when large.
#include <algorithm>
#include <cmath>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/Kernels.h"

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

}  // namespace

void add(KernelCall& c) { binary(c, [](auto a, auto b) { return a + b; }); }
void sub(KernelCall& c) { binary(c, [](auto a, auto b) { return a - b; }); }
void mul(KernelCall& c) { binary(c, [](auto a, auto b) { return a * b; }); }
void div(KernelCall& c) { binary(c, [](auto a, auto b) { return a / b; }); }
void max(KernelCall& c) { binary(c, [](auto a, auto b) { return nanMax(a, b); }); }
void neg(KernelCall& c) { unary(c, [](auto a) { return -a; }); }
void exp(KernelCall& c) { unary(c, [](auto a) { return std::exp(a); }); }
void log(KernelCall& c) { unary(c, [](auto a) { return std::log(a); }); }
void sqrt(KernelCall& c) { unary(c, [](auto a) { return std::sqrt(a); }); }
void relu(KernelCall& c) { unary(c, [](auto a) { return reluOf(a); }); }


void greater_equal(KernelCall& c) {
  binary(c, [](auto a, auto b) { return a >= b ? decltype(a)(1) : decltype(a)(0); });
}
// inputs: result_grad, relu result
void relu_backward(KernelCall& c) {
  binary(c, [](auto dy, auto y) { return reluGradOf(dy, y); });
}

}  // namespace spmd::runtime::cpu
