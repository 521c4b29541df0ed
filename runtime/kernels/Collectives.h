// Collectives for replicas that share one process (cuda:0*N, sim:N): every replica publishes a
// device pointer through the communicator, then each replica reduces its own slice of the
// elements over all replicas with the fold tree and writes the result into every replica's buffer
// (the CPU backend's algorithm, on the device, so every replica holds the same bits). A
// combined all_reduce packs its operands into one flat device buffer first.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/kernels/Common.h"
#include "runtime/device/Communicator.h"
#include "runtime/device/Fold.h"

namespace spmd::runtime::kernels {

constexpr int kMaxReplicas = 64;

struct Peers {
  void* data[kMaxReplicas];
};

// Element i of every replica's buffer becomes the fold tree's root over the replicas
// (runtime/device/Fold.h's foldLeaves), for i in [begin, begin + n).
template <typename T>
struct ReduceSliceFn {
  Peers peers;
  int replicas;
  int64_t begin;
  Reduction op;
  SPMD_HOST_DEVICE void operator()(int64_t k) const {
    int64_t i = begin + k;
    const Peers& p = peers;
    T acc = foldLeaves<T>(replicas, [&](int r) { return static_cast<const T*>(p.data[r])[i]; }, op, replicas);
    for (int r = 0; r < replicas; ++r) static_cast<T*>(peers.data[r])[i] = acc;
  }
};

// out[i] = the fold tree's root over rows[0][i], ..., rows[n-1][i] (row r at rows + r * count):
// the fold of NCCL's exact all-reduce (runtime/cuda/NcclFold.cu).
template <typename T>
struct FoldRowsFn {
  const T* rows;
  int n;
  int64_t count;
  Reduction op;
  T* out;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const T* r0 = rows + i;
    const int64_t stride = count;
    out[i] = foldLeaves<T>(n, [&](int r) { return r0[r * stride]; }, op, n);
  }
};

inline std::string collectiveWhat(const KernelCall& call) { return call.step.op + " at " + call.step.location; }

// The device pointers of the replicas, which only replicas sharing a process can exchange.
inline PointerExchange& pointersOf(Communicator& comm, const std::string& what) {
  if (PointerExchange* pointers = comm.pointers()) return *pointers;
  throw Error(what + ": device pointers cannot cross processes; in a job of several processes use the cpu "
              "backend (--devices cpu:K under mpirun), or NCCL with one GPU per replica");
}

// Reduces `count` elements at `data` (this replica's device memory) across the replicas.
template <class Api>
void reduceInPlace(KernelCall& call, void* data, DType dtype, int64_t count, Reduction op) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL
    library->allReduce(data, dtype, count, op, Api::nativeStream(call), what);
    return;
  }
  if (comm.size() > kMaxReplicas)
    throw Error(what + ": at most " + std::to_string(kMaxReplicas) + " GPU replicas per process");
  Api::synchronize(call);  // this replica's operand is ready
  std::vector<const void*> pointers = pointersOf(comm, what).exchange(data, what);
  Peers peers{};
  for (int r = 0; r < comm.size(); ++r) peers.data[r] = const_cast<void*>(pointers[r]);
  int64_t per = (count + comm.size() - 1) / comm.size();
  int64_t begin = std::min<int64_t>(count, per * comm.rank()), end = std::min<int64_t>(count, begin + per);
  if (end > begin) {
    if (dtype == DType::f32)
      Api::forEach(call, end - begin, ReduceSliceFn<float>{peers, comm.size(), begin, op});
    else if (dtype == DType::f64)
      Api::forEach(call, end - begin, ReduceSliceFn<double>{peers, comm.size(), begin, op});
    else
      Api::forEach(call, end - begin, ReduceSliceFn<int32_t>{peers, comm.size(), begin, op});
  }
  Api::synchronize(call);
  comm.barrier(what);  // every slice is written before anyone reads or reuses the buffers
}

template <class Api>
void all_reduce(KernelCall& call) {
  Reduction op = parseReduction(call.step.text("reduction"));
  DType dtype = call.in[0].dtype;
  if (call.in.size() == 1) {
    Api::copy(call, call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(dtype));
    reduceInPlace<Api>(call, call.out[0].data, dtype, call.out[0].numel(), op);
    return;
  }
  int64_t total = 0;
  for (const TensorView& v : call.in) total += v.numel();
  std::byte* staging = scratch<Api>(call, total * dtypeSize(dtype));
  size_t offset = 0;
  for (const TensorView& v : call.in) {
    Api::copy(call, staging + offset, v.data, v.numel() * dtypeSize(dtype));
    offset += v.numel() * dtypeSize(dtype);
  }
  reduceInPlace<Api>(call, staging, dtype, total, op);
  offset = 0;
  for (const TensorView& v : call.out) {
    Api::copy(call, v.data, staging + offset, v.numel() * dtypeSize(dtype));
    offset += v.numel() * dtypeSize(dtype);
  }
}

template <class Api>
void all_gather(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL
    library->allGather(call.in[0].data, call.out[0].data, bytes, Api::nativeStream(call), what);
    return;
  }
  Api::synchronize(call);
  std::vector<const void*> sources = pointersOf(comm, what).exchange(call.in[0].data, what);
  for (int r = 0; r < comm.size(); ++r) Api::copy(call, call.out[0].as<std::byte>() + r * bytes, sources[r], bytes);
  Api::synchronize(call);
  comm.barrier(what);  // inputs stay alive until every replica has copied them
}

// Sum over replicas of input[N, ...], keeping this replica's row (a full all-reduce of a copy).
template <class Api>
void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  std::byte* staging = scratch<Api>(call, bytes);
  Api::copy(call, staging, call.in[0].data, bytes);
  reduceInPlace<Api>(call, staging, call.in[0].dtype, call.in[0].numel(), Reduction::Sum);
  size_t row = bytes / comm.size();
  Api::copy(call, call.out[0].data, staging + comm.rank() * row, row);
}

struct FillFn {
  int32_t* y;
  int32_t value;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = value; }
};

template <class Api>
void axis_index(KernelCall& call) {
  Api::forEach(call, 1, FillFn{call.out[0].as<int32_t>(), communicatorOf(call).virtualRank()});
}

#define SPMD_LIBRARY_COLLECTIVE_OPS(X) X(all_reduce) X(all_gather) X(reduce_scatter) X(axis_index)

}  // namespace spmd::runtime::kernels
