// A device the executor runs a Program on: it allocates buffers and names the kernel table that
// implements every op for it. Backends: runtime/cpu and runtime/cuda.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/Kernel.h"

namespace spmd::runtime {

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual const KernelTable& kernels() const = 0;
  // Device memory of `bytes` bytes, 64-byte aligned; freed when the pointer dies.
  virtual std::shared_ptr<std::byte> allocate(size_t bytes) = 0;
  // True when host pointers can be passed to kernels directly (no copy in or out).
  virtual bool hostAccessible() const = 0;
  virtual void copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  virtual void copyToHost(std::byte* dst, const std::byte* src, size_t bytes) = 0;
  // Waits for all work queued on the device (asynchronous backends); errors surface here.
  virtual void synchronize() {}
  // Makes this device current for the calling thread (CUDA: cudaSetDevice); the executor calls
  // it at the start of every run, since replicas run on worker threads.
  virtual void activate() {}
};

}  // namespace spmd::runtime
