// Internal to runtime/cuda: error checks that name the failing call, the device of a KernelCall,
// and the launch shape of grid-stride kernels. Included by .cpp and .cu files of the backend.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "runtime/device/Kernel.h"
#include "runtime/cuda/CudaDevice.h"

namespace spmd::runtime::cuda {

inline void check(cudaError_t result, const std::string& what) {
  if (result != cudaSuccess)
    throw Error("CUDA " + what + " failed: " + cudaGetErrorName(result) + " (" +
                cudaGetErrorString(result) + ")");
}

inline CudaDevice& deviceOf(const KernelCall& call) {
  auto* device = static_cast<CudaDevice*>(call.device);
  if (!device) throw Error("CUDA kernel '" + call.step.op + "' called without its device");
  return *device;
}

inline cudaStream_t streamOf(const KernelCall& call) {
  return static_cast<cudaStream_t>(deviceOf(call).stream());
}

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, no more than needed.
inline unsigned blocksFor(int64_t n, unsigned threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

// After a launch: a bad configuration is reported at once, naming the step.
inline void checkLaunch(const KernelCall& call) {
  check(cudaGetLastError(), "launch of '" + call.step.op + "' (" + call.step.location + ")");
}

}  // namespace spmd::runtime::cuda
