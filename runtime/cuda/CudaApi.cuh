// The CUDA backend's Api for the kernel library (runtime/kernels/Common.h): functors
// run as a grid-stride kernel on the device's stream, copies are cudaMemcpyAsync on it.
#pragma once

#include "runtime/cuda/Cuda.h"

namespace spmd::runtime::cuda {

template <typename F>
__global__ void forEachKernel(long long n, F f) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    f(i);
}

struct CudaApi {
  template <typename F>
  static void forEach(const KernelCall& call, int64_t n, const F& f) {
    if (n <= 0) return;
    const kernels::Launch l = checked(kernels::gridStride("forEach", n), call);
    forEachKernel<<<unsigned(l.blocks), l.threads, 0, streamOf(call)>>>(n, f);
    checkLaunch(call);
  }
  static void copy(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, streamOf(call)), call.step.op + " copy");
  }
  static void zero(const KernelCall& call, void* dst, size_t bytes) {
    check(cudaMemsetAsync(dst, 0, bytes, streamOf(call)), call.step.op + " memset");
  }
  static void toHost(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, streamOf(call)), call.step.op + " copy to host");
    synchronize(call);
  }
  static void synchronize(const KernelCall& call) {
    check(cudaStreamSynchronize(streamOf(call)), call.step.op + " at " + call.step.location);
  }
  static std::shared_ptr<std::byte> allocate(const KernelCall& call, size_t bytes) {
    return deviceOf(call).allocate(bytes);
  }
  // The cudaStream_t a device library (NCCL) orders its collectives on.
  static void* nativeStream(const KernelCall& call) { return streamOf(call); }
};

}  // namespace spmd::runtime::cuda
