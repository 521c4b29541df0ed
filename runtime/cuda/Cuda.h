// Internal to runtime/cuda: error checks that name the failing call, the device of a KernelCall,
// and launches checked against the device's limits. Included by .cpp and .cu files of the backend.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device/Kernel.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/kernels/Launch.h"

namespace spmd::runtime::cuda {

// Throws for a failed call; the thread's last-error slot is cleared first, so the next launch's
// check (cudaGetLastError) does not report this error again.
inline void check(cudaError_t result, const std::string& what) {
  if (result != cudaSuccess) {
    cudaGetLastError();
    throw Error("CUDA " + what + " failed: " + cudaGetErrorName(result) + " (" + cudaGetErrorString(result) + ")");
  }
}

inline CudaDevice& deviceOf(const KernelCall& call) {
  auto* device = static_cast<CudaDevice*>(call.device);
  if (!device) throw Error("CUDA kernel '" + call.step.op + "' called without its device");
  return *device;
}

inline cudaStream_t streamOf(const KernelCall& call) {
  return static_cast<cudaStream_t>(deviceOf(call).stream());
}

// `launch` checked against sm_90's limits (runtime/kernels/Launch.h) for `call`'s step.
inline kernels::Launch checked(const kernels::Launch& launch, const KernelCall& call) {
  kernels::checkLaunch(launch, "'" + call.step.op + "' at " + call.step.location);
  return launch;
}

// After a launch: a bad configuration is reported at once, naming the step.
inline void checkLaunch(const KernelCall& call) {
  check(cudaGetLastError(), "launch of '" + call.step.op + "' (" + call.step.location + ")");
}

// The least time of three runs of `run` on the device's clock, after one to warm up (a variant's
// timing for KernelChoices).
inline double leastOfThreeRuns(const KernelCall& call, const std::function<void()>& run) {
  run();
  std::unique_ptr<DeviceClock> clock = deviceOf(call).clock();
  clock->mark();
  for (int i = 0; i < 3; ++i) {
    run();
    clock->mark();
  }
  deviceOf(call).synchronize();
  const std::vector<double> at = clock->seconds();
  double least = INFINITY;
  for (size_t i = 1; i < at.size(); ++i) least = std::min(least, at[i] - at[i - 1]);
  return least;
}

// A kernel NVRTC compiled, loaded from its binary (the fused kernels', a custom op's); unloaded
// with the step's cache.
struct LoadedKernel {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  ~LoadedKernel() {
    if (library) cudaLibraryUnload(library);
  }
};

}  // namespace spmd::runtime::cuda
