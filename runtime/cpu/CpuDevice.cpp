// CpuDevice: aligned host allocations and memcpy transfers.
#include "runtime/cpu/CpuDevice.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/base/CopyBytes.h"
#include "runtime/base/HostMemory.h"

namespace spmd::runtime {

std::shared_ptr<std::byte> CpuDevice::allocate(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!memory)
    throw Error("cpu: out of host memory allocating " + formatBytes(bytes) + " (" +
                formatBytes(availableHostBytes()) + " available)");
  return {static_cast<std::byte*>(memory), [](std::byte* p) { std::free(p); }};
}

void CpuDevice::copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) {
  countToDevice(bytes);
  if (dst != src) copyBytes(dst, src, bytes);
}

void CpuDevice::copyToHost(std::byte* dst, const std::byte* src, size_t bytes) {
  countToHost(bytes);
  if (dst != src) copyBytes(dst, src, bytes);
}

void CpuDevice::copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst != src) copyBytes(dst, src, bytes);
}

}  // namespace spmd::runtime
