// The simulator's Api for the kernel library (runtime/kernels/Common.h): the same
// functors the CUDA backend launches run here on the device's stream thread with the geometry
// the GPU would get: grid-stride loops visit their (block, thread) pairs in a seeded random
// order, block kernels run as emulated blocks with barriers and checked shared memory
// (runtime/sim/BlockEmulator.h); copies are queued on the stream like cudaMemcpyAsync.
#pragma once

#include <cstring>

#include "runtime/kernels/Launch.h"
#include "runtime/sim/BlockEmulator.h"
#include "runtime/sim/Coverage.h"
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
    const kernels::Launch l = kernels::gridStride("forEach", n);
    kernels::checkLaunch(l, stepName(call));
    deviceOf(call).enqueue(stepName(call), [f, n, l, op = call.step.op] {
      recordExecutedKernel(op, functorName<F>());
      const GridOrder order = gridStrideOrder(l);
      const int64_t grid = l.blocks * l.threads;
      for (int64_t b : order.blocks)
        for (int t : order.threads)
          for (int64_t i = b * l.threads + t; i < n; i += grid) f(i);
    });
    deviceOf(call).markKernel(functorName<F>());
  }
  // A block kernel: f(block) on every thread of every block of `launch`.
  template <typename F>
  static void forBlocks(const KernelCall& call, const kernels::Launch& launch, const F& f) {
    const std::string where = stepName(call);
    kernels::checkLaunch(launch, where);
    deviceOf(call).enqueue(where, [f, launch, where, op = call.step.op] {
      recordExecutedKernel(op, functorName<F>());
      runBlocks(launch, where, [&f](SimBlock& b) { f(b); });
    });
    deviceOf(call).markKernel(functorName<F>());
  }
  static void copy(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    if (dst != src && bytes)
      deviceOf(call).enqueue(stepName(call), [dst, src, bytes, op = call.step.op] {
        recordExecutedOp(op);
        std::memcpy(dst, src, bytes);
      });
  }
  static void zero(const KernelCall& call, void* dst, size_t bytes) {
    deviceOf(call).enqueue(stepName(call), [dst, bytes, op = call.step.op] {
      recordExecutedOp(op);
      std::memset(dst, 0, bytes);
    });
  }
  static void toHost(const KernelCall& call, void* dst, const void* src, size_t bytes) {
    deviceOf(call).copyToHost(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes);
  }
  static void synchronize(const KernelCall& call) { deviceOf(call).synchronize(); }
  static std::shared_ptr<std::byte> allocate(const KernelCall& call, size_t bytes) {
    return deviceOf(call).allocate(bytes);
  }
  // Memory the host and every device of the process read and write (the simulator's is host memory).
  static std::shared_ptr<std::byte> allocateHostVisible(const KernelCall& call, size_t bytes) {
    std::shared_ptr<std::byte> memory = deviceOf(call).allocate(bytes);
    std::memset(memory.get(), 0, bytes);  // no kernel holds it yet
    return memory;
  }
  // In-process collectives of up to this many replicas meet on the device (kernels/Collectives.h's
  // rendezvous), as on CUDA.
  static constexpr int kDeviceRendezvousReplicas = 64;
  // No device library runs on the simulated device (its communicators offer no DeviceCollectives).
  static void* nativeStream(const KernelCall&) { return nullptr; }
};

// The simulator's own kernel for generated code (runtime/sim/Fused.cpp).
void fused(KernelCall& call);
// A custom op's step: its CUDA kernel built for the host, or its host kernel (sim/CustomCall.cpp).
void customCall(KernelCall& call);
// `cpu` run on the stream thread with copies of the views, its cache in `cache` (a slot the
// executor keeps for this step, which outlives the run).
void queueCpu(KernelCall& call, KernelFn cpu, std::vector<TensorView> in, std::vector<TensorView> out,
              std::shared_ptr<void>* cache);

}  // namespace spmd::runtime::sim
