// A device the executor runs a Program on: it allocates buffers and names the kernel table that
// implements every op for it. Backends: runtime/cpu and runtime/cuda.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/device/Graph.h"
#include "runtime/device/Kernel.h"

namespace spmd::runtime {

// Timestamps on a device's own clock, queued with its work: mark() queues one behind everything
// queued so far; after the device's synchronize(), seconds() gives every mark's time since the
// first. CUDA: events on the stream; the simulator: its stream thread reads the host's clock.
class DeviceClock {
 public:
  virtual ~DeviceClock() = default;
  virtual void mark() = 0;
  virtual std::vector<double> seconds() = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual const KernelTable& kernels() const = 0;
  // Device memory of `bytes` bytes, 64-byte aligned; freed when the pointer dies.
  virtual std::shared_ptr<std::byte> allocate(size_t bytes) = 0;
  // True when host pointers can be passed to kernels directly (no copy in or out).
  virtual bool hostAccessible() const = 0;
  // Host to device and device to host; copyToHost returns when `dst` holds the data. Both count
  // in transfers().
  virtual void copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  virtual void copyToHost(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  // Between two buffers of this device, queued like a kernel.
  virtual void copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  // Whether this device's kernels read and write buffers in `layout` (runtime/program/
  // Layouts.h; "" plain): the executor refuses a program with buffers in any other.
  virtual bool readsLayout(std::string_view layout) const { return layout.empty(); }
  // The CUDA device ordinal whose memory allocate() returns (DLPack's kDLCUDA device_id), or -1
  // when this device's memory is not a GPU's.
  virtual int cudaOrdinal() const { return -1; }
  // Waits for all work queued on the device (asynchronous backends); errors surface here.
  virtual void synchronize() {}
  // Makes this device current for the calling thread (CUDA: cudaSetDevice); the executor calls
  // it at the start of every run, since replicas run on worker threads.
  virtual void activate() {}
  // Stream capture into graphs (runtime/device/Graph.h); null where the device has none.
  virtual GraphCapture* graphs() { return nullptr; }
  // A clock on the device's work (see DeviceClock); null where work runs when it is called (the
  // host's clock times it).
  virtual std::unique_ptr<DeviceClock> clock() { return nullptr; }
  // SPMD_PROFILE=kernels: while `clock` is set, every kernel a step launches on this device (our
  // own, the fused ones, cuDNN's and cuBLAS's calls) marks it after the launch and appends its
  // name to `names` (the executor's profiled runs; null: off).
  void markKernelsOn(DeviceClock* clock, std::vector<std::string>* names) { kernelClock_ = clock, kernelNames_ = names; }
  void markKernel(const std::string& name) {
    if (!kernelClock_) return;
    kernelNames_->push_back(name);
    kernelClock_->mark();
  }

  // Copies between host and device since the device was made (tests count them to prove that
  // device-resident values make no round trip).
  struct Transfers {
    int64_t toDevice = 0, toHost = 0;            // calls
    int64_t bytesToDevice = 0, bytesToHost = 0;
  };
  Transfers transfers() const {
    return {toDevice_.load(), toHost_.load(), bytesToDevice_.load(), bytesToHost_.load()};
  }
  // Times the host waited for this device's queued work (synchronize, a copy to the host) since
  // it was made; 0 on devices whose work runs when it is called. The executor counts those
  // inside a step (Executor::lastCall).
  int64_t hostWaits() const { return hostWaits_.load(); }

 protected:
  void countToDevice(size_t bytes) { ++toDevice_, bytesToDevice_ += int64_t(bytes); }
  void countToHost(size_t bytes) { ++toHost_, bytesToHost_ += int64_t(bytes); }
  void countHostWait() { ++hostWaits_; }

 private:
  std::atomic<int64_t> toDevice_{0}, toHost_{0}, bytesToDevice_{0}, bytesToHost_{0}, hostWaits_{0};
  DeviceClock* kernelClock_ = nullptr;
  std::vector<std::string>* kernelNames_ = nullptr;
};

}  // namespace spmd::runtime
