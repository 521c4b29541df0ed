// The simulator's Api for the kernel library (runtime/kernels/Common.h): the same
// functors the CUDA backend launches as grid-stride kernels run here as loops on the device's
// stream thread; copies are queued on it like cudaMemcpyAsync.
#pragma once

#include <cstring>

#include "runtime/kernels/Launch.h"
#include "runtime/sim/SimDevice.h"

namespace spmd::runtime::sim {

inline SimDevice& deviceOf(const KernelCall& call) {
  auto* device = static_cast<SimDevice*>(call.device);
  if (!device) throw Error("sim kernel '" + call.step.op + "' called without its device");
  return *device;
}

inline std::string stepName(const KernelCall& call) { return "'" + call.step.op + "' (" + call.step.where() + ")"; }

struct SimApi {
  template <typename F>
  static void forEach(const KernelCall& call, int64_t n, const F& f) {
    if (n <= 0) return;
    // The geometry the CUDA backend launches this loop with, checked as it is there.
    kernels::checkLaunch(kernels::gridStride("forEach", n), stepName(call));
    deviceOf(call).enqueue(stepName(call), [f, n] {
      for (int64_t i = 0; i < n; ++i) f(i);
    });
  }
  static void copy(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes)
      deviceOf(call).enqueue(stepName(call), [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  }
  static void zero(const KernelCall& call, void* dst, size_t bytes) {
    deviceOf(call).enqueue(stepName(call), [dst, bytes] { std::memset(dst, 0, bytes); });
  }
  static void toHost(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    deviceOf(call).copyToHost(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes);
  }
  static void synchronize(const KernelCall& call) { deviceOf(call).synchronize(); }
  static std::shared_ptr<std::byte> allocate(const KernelCall& call, size_t bytes) {
    return deviceOf(call).allocate(bytes);
  }
  // No device library runs on the simulated device (its communicators offer no DeviceCollectives).
  static void* nativeStream(const KernelCall&) { return nullptr; }
};

}  // namespace spmd::runtime::sim
