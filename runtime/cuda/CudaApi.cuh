// The CUDA backend's Api for the kernel library (runtime/kernels/Common.h): functors
// run as a grid-stride kernel on the device's stream, copies are cudaMemcpyAsync on it.
#pragma once

#include <cstring>

#include "runtime/cuda/Cuda.h"
#include "runtime/kernels/FunctorName.h"

namespace spmd::runtime::cuda {

template <typename F>
__global__ void forEachKernel(long long n, F f) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    f(i);
}

// A thread's view of its block for the library's block kernels (the simulator's SimBlock offers
// the same, runtime/sim/BlockEmulator.h).
struct GpuBlock {
#ifdef __CUDA_ARCH__
  __device__ int thread() const { return int(threadIdx.x); }
  __device__ long long block() const { return blockIdx.x; }
  __device__ int blockSize() const { return int(blockDim.x); }
  __device__ long long gridSize() const { return gridDim.x; }
  __device__ void sync() const { __syncthreads(); }
  template <typename T>
  __device__ T* shared() const {
    extern __shared__ double dynamicShared[];  // the launch's dynamic shared memory, 8-byte aligned
    return reinterpret_cast<T*>(dynamicShared);
  }
#endif
};

template <typename F>
__global__ void blockKernel(F f) {
  GpuBlock b;
  f(b);
}

struct CudaApi {
  template <typename F>
  static void forEach(const KernelCall& call, int64_t n, const F& f) {
    if (n <= 0) return;
    const kernels::Launch l = checked(kernels::gridStride("forEach", n), call);
    forEachKernel<<<unsigned(l.blocks), l.threads, 0, streamOf(call)>>>(n, f);
    checkLaunch(call);
    deviceOf(call).markKernel(naming::functorName<F>());
  }
  template <typename F>
  static void forBlocks(const KernelCall& call, const kernels::Launch& launch, const F& f) {
    const kernels::Launch l = checked(launch, call);
    blockKernel<<<unsigned(l.blocks), l.threads, l.dynamicShared, streamOf(call)>>>(f);
    checkLaunch(call);
    deviceOf(call).markKernel(naming::functorName<F>());
  }
  static void copy(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes)
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, streamOf(call)), call.step.op + " copy");
  }
  static void zero(const KernelCall& call, void* dst, size_t bytes) {
    check(cudaMemsetAsync(dst, 0, bytes, streamOf(call)), call.step.op + " memset");
  }
  // Through the device, which counts the bytes (Device::transfers) as the simulator's does.
  static void toHost(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    deviceOf(call).copyToHost(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes);
  }
  static void synchronize(const KernelCall& call) {
    deviceOf(call).refuseWhileCapturing("'" + call.step.op + "' waiting for the stream");
    check(cudaStreamSynchronize(streamOf(call)), call.step.op + " at " + call.step.location);
  }
  static std::shared_ptr<std::byte> allocate(const KernelCall& call, size_t bytes) {
    return deviceOf(call).allocate(bytes);
  }
  // Pinned host memory mapped into every GPU's address space (the same pointer on host and device).
  static std::shared_ptr<std::byte> allocateHostVisible(const KernelCall& call, size_t bytes) {
    deviceOf(call).refuseWhileCapturing("an allocation of host-visible memory");
    void* memory = nullptr;
    check(cudaHostAlloc(&memory, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
          "cudaHostAlloc (" + call.step.op + ")");
    std::memset(memory, 0, bytes);
    void* onDevice = nullptr;
    check(cudaHostGetDevicePointer(&onDevice, memory, 0), "cudaHostGetDevicePointer (" + call.step.op + ")");
    if (onDevice != memory) {
      cudaFreeHost(memory);
      throw Error("mapped host memory has another address on " + deviceOf(call).name() +
                  " (no unified addressing); set SPMD_DEVICE_RENDEZVOUS=0");
    }
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(memory), [](std::byte* p) { cudaFreeHost(p); });
  }
  // In-process collectives of up to this many replicas meet on the device (kernels/Collectives.h's
  // rendezvous): a replica's barrier kernel waits while the others' kernels run, which needs
  // their streams on distinct hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default).
  static constexpr int kDeviceRendezvousReplicas = 8;
  // The cudaStream_t a device library (NCCL) orders its collectives on.
  static void* nativeStream(const KernelCall& call) { return streamOf(call); }
};

}  // namespace spmd::runtime::cuda
