// CUDA elementwise kernels: grid-stride loops in the tensor's type, same formulas as the CPU
// backend's (runtime/cpu/Elementwise.cpp).
#include "runtime/NanRules.h"
#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime::cuda {
namespace {

template <typename T, typename Fn>
__global__ void binaryKernel(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ y,
                             long long n, Fn fn) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = fn(a[i], b[i]);
}

template <typename T, typename Fn>
__global__ void unaryKernel(const T* __restrict__ x, T* __restrict__ y, long long n, Fn fn) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = fn(x[i]);
}

template <typename Fn>
void binary(KernelCall& call, Fn fn) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t n = call.out[0].numel();
    binaryKernel<<<blocksFor(n), 256, 0, streamOf(call)>>>(call.in[0].as<T>(), call.in[1].as<T>(),
                                                           call.out[0].as<T>(), n, fn);
  });
  checkLaunch(call);
}

template <typename Fn>
void unary(KernelCall& call, Fn fn) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t n = call.out[0].numel();
    unaryKernel<<<blocksFor(n), 256, 0, streamOf(call)>>>(call.in[0].as<T>(), call.out[0].as<T>(), n, fn);
  });
  checkLaunch(call);
}

}  // namespace

void add(KernelCall& c) { binary(c, [] __device__(auto a, auto b) { return a + b; }); }
void sub(KernelCall& c) { binary(c, [] __device__(auto a, auto b) { return a - b; }); }
void mul(KernelCall& c) { binary(c, [] __device__(auto a, auto b) { return a * b; }); }
void div(KernelCall& c) { binary(c, [] __device__(auto a, auto b) { return a / b; }); }
void max(KernelCall& c) { binary(c, [] __device__(auto a, auto b) { return nanMax(a, b); }); }
void neg(KernelCall& c) { unary(c, [] __device__(auto a) { return -a; }); }
void exp(KernelCall& c) { unary(c, [] __device__(auto a) { return ::exp(a); }); }
void log(KernelCall& c) { unary(c, [] __device__(auto a) { return ::log(a); }); }
void sqrt(KernelCall& c) { unary(c, [] __device__(auto a) { return ::sqrt(a); }); }
void relu(KernelCall& c) { unary(c, [] __device__(auto a) { return reluOf(a); }); }
void greater_equal(KernelCall& c) {
  binary(c, [] __device__(auto a, auto b) { return a >= b ? decltype(a)(1) : decltype(a)(0); });
}
// inputs: result_grad, relu result
void relu_backward(KernelCall& c) {
  binary(c, [] __device__(auto dy, auto y) { return reluGradOf(dy, y); });
}

}  // namespace spmd::runtime::cuda
