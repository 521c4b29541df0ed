// Kernel code written once for the CUDA backend and the simulated accelerator (runtime/sim):
// per-element functors marked SPMD_HOST_DEVICE, launched through a backend's Api, which nvcc
// compiles for the GPU (runtime/cuda/CudaApi.cuh) and the host compiler for the simulator's
// stream thread (runtime/sim/SimApi.h). An Api provides, for one KernelCall's device:
//   forEach(call, n, f)             f(i) for i in [0, n), queued on the device's stream
//   forBlocks(call, launch, f)      (CUDA and sim only) f(block) on every thread of every block
//                                   of `launch`, queued; a Block offers thread(), block(),
//                                   blockSize(), gridSize(), sync() (__syncthreads) and
//                                   shared<T>() (the launch's dynamic shared memory as T[])
//   copy(call, dst, src, bytes)     device to device, queued
//   zero(call, dst, bytes)          queued
//   toHost(call, dst, src, bytes)   waits for the stream, then copies to host memory
//   synchronize(call)               waits for the stream; asynchronous errors surface here
//   allocate(call, bytes)           device memory owned by the returned pointer
//   allocateHostVisible(call, bytes)  zeroed memory the host and the process's devices all address
//   nativeStream(call)              the stream a device library (NCCL) orders its work on
//   kDeviceRendezvousReplicas       up to how many replicas in-process collectives meet on the
//                                   device (Collectives.h) rather than on the host (0: never)
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/base/NanRules.h"
#include "runtime/device/Kernel.h"

namespace spmd::runtime::kernels {

// The step's cached device scratch of `bytes` (allocated on the first call).
template <class Api>
std::byte* scratch(KernelCall& call, size_t bytes) {
  if (!call.cache) call.cache = std::make_shared<std::shared_ptr<std::byte>>(Api::allocate(call, bytes));
  return static_cast<std::shared_ptr<std::byte>*>(call.cache.get())->get();
}

// Index checks on the device: a kernel records its bad indices in `flag`, one 64-bit word
// (BadIndexFlag) that keeps the one at the lowest position, so the error names the first bad
// index whatever order the threads ran in. This clears the step's flag and queues
// `launch(flag)`; where the executor takes deferred checks (KernelCall::check) it leaves the flag
// and `report` there, read after the step's end, so nothing here waits on the host; otherwise it
// waits for the step and calls `report(index, position)` (which throws) when one was bad.
// `report` must own what it reads: it may run after this call has returned.
// The check of `flag` (queued work fills it): left to the executor where it takes deferred
// checks, else read now (waiting for the stream), calling `report` when it holds a bad index.
template <class Api, typename Report>
void deferOrCheck(KernelCall& call, const BadIndexFlag* flag, Report report) {
  if (call.check) {
    *call.check = DeferredCheck{flag, std::move(report)};
    return;
  }
  BadIndexFlag host = 0;
  Api::toHost(call, &host, flag, sizeof host);
  int32_t index = 0;
  int64_t position = 0;
  if (decodeBadIndex(host, &index, &position)) report(index, position);
}

// The bytes of a step's scratch before withIndexCheck's work space: the flag, padded.
inline constexpr size_t kIndexFlagBytes = 256;

// `workBytes`: work space the launch needs besides the flag, in the same step scratch (a step has
// one), at indexCheckWork(flag).
template <class Api, typename Launch, typename Report>
void withIndexCheck(KernelCall& call, Launch launch, Report report, size_t workBytes = 0) {
  static_assert(sizeof(BadIndexFlag) <= kIndexFlagBytes);
  auto* flag = reinterpret_cast<BadIndexFlag*>(scratch<Api>(call, kIndexFlagBytes + workBytes));
  Api::zero(call, flag, sizeof(BadIndexFlag));
  launch(flag);
  deferOrCheck<Api>(call, flag, std::move(report));
}

inline std::byte* indexCheckWork(BadIndexFlag* flag) { return reinterpret_cast<std::byte*>(flag) + kIndexFlagBytes; }

// Records index `value` at `position` in `flag` unless it is in [0, size); returns whether it is.
// The flag keeps the largest key, ~(position << 32 | value): the lowest position's (0: none).
// Offset of the index-th element of a row-major walk over `dims` laid out with `strides`.
SPMD_HOST_DEVICE inline int64_t offsetOf(const int64_t* dims, const int64_t* strides, int rank, int64_t index) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return offset;
}

SPMD_HOST_DEVICE inline bool indexValid(int32_t value, int64_t position, int64_t size, BadIndexFlag* flag) {
  if (value >= 0 && value < size) return true;
  const BadIndexFlag key = ~((BadIndexFlag(uint32_t(position)) << 32) | BadIndexFlag(uint32_t(value)));
#if defined(__CUDA_ARCH__)
  atomicMax(flag, key);
#else
  BadIndexFlag old = __atomic_load_n(flag, __ATOMIC_RELAXED);
  while (old < key && !__atomic_compare_exchange_n(flag, &old, key, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
#endif
  return false;
}

// Records the first index outside [0, size) in `bad` (a scatter's or a segment fold's check: their
// gathers skip such indices).
struct AxisIndexCheckFn {
  const int32_t* indices;
  int64_t size;
  BadIndexFlag* bad;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { indexValid(indices[i], i, size, bad); }
};

// Block-wide trees (the block kernels of the CUDA backend and the simulator): every thread's `v`
// combined by `op` in a fixed tree over shared memory, returned to every thread. The block's
// size must be a power of two (each round halves it); kBlockTreeThreads is the one they use, with
// as many doubles of dynamic shared memory. The tree's order depends on the block size alone, so
// the bits do not depend on timing.
constexpr int kBlockTreeThreads = 256;

template <class Block, class Op>
SPMD_HOST_DEVICE double blockReduce(Block& b, double v, Op op) {
  auto shared = b.template shared<double>();
  const int t = b.thread();
  shared[t] = v;
  b.sync();
  for (int width = b.blockSize() / 2; width > 0; width /= 2) {
    if (t < width) shared[t] = op(shared[t], shared[t + width]);
    b.sync();
  }
  double total = shared[0];
  b.sync();
  return total;
}

struct AddDoubles {
  SPMD_HOST_DEVICE double operator()(double a, double b) const { return a + b; }
};

template <class Block>
SPMD_HOST_DEVICE double blockSum(Block& b, double v) {
  return blockReduce(b, v, AddDoubles{});
}

}  // namespace spmd::runtime::kernels
