// The CPU backend's Api for the kernel library (runtime/kernels/Common.h): a kernel's per-element
// functor runs as a loop on the replica's thread, split across the OpenMP pool (the one oneDNN
// and our own kernels use) from kThreadedCalls calls on; copies are memcpy and nothing is queued.
// The library's functors are written for a GPU's threads: no two calls write one element and none
// reads another's result, so the split changes neither the values nor their bits.
#pragma once

#include <cstring>
#include <memory>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu {

struct HostLoop {
  // Below this many calls, one thread (a parallel region's start costs a few microseconds; a
  // call is an element or a row).
  static constexpr int64_t kThreadedCalls = 1 << 12;
  template <typename F>
  static void forEach(const KernelCall&, int64_t n, const F& f) {
#pragma omp parallel for if (n >= kThreadedCalls) schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  }
  static void copy(const KernelCall&, void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes) std::memmove(dst, src, bytes);
  }
  static void zero(const KernelCall&, void* dst, size_t bytes) { std::memset(dst, 0, bytes); }
  static void toHost(const KernelCall&, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  static void synchronize(const KernelCall&) {}
  static std::shared_ptr<std::byte> allocate(const KernelCall&, size_t bytes) {
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }
  static void* nativeStream(const KernelCall&) { return nullptr; }
  static std::shared_ptr<std::byte> allocateHostVisible(const KernelCall& call, size_t bytes) {
    std::shared_ptr<std::byte> memory = allocate(call, bytes);
    std::memset(memory.get(), 0, bytes);
    return memory;
  }
  // The replica's own thread runs its steps: in-process collectives meet on the host.
  static constexpr int kDeviceRendezvousReplicas = 0;
};

}  // namespace spmd::runtime::cpu
