// Collectives for replicas that share one process (cuda:0*N, sim:N): every replica publishes a
// device pointer through the communicator, then each replica gathers its own slice of the
// elements from every replica into rows, folds them with the fold tree (FoldRowsFn, the kernel
// NCCL's exact mode folds its received rows with, runtime/cuda/Nccl.cpp) and copies the result
// into every replica's buffer: NCCL's exact algorithm with device copies for its sends and
// receives, so every replica holds the same bits and one fold kernel serves both. A combined
// all_reduce packs its operands into one flat device buffer first.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Shape.h"
#include "runtime/device/Communicator.h"
#include "runtime/device/Fold.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

// out[i] = the fold tree's root over rows[0][i], ..., rows[n-1][i] (row r at rows + r * count):
// the fold of NCCL's exact all-reduce (runtime/cuda/NcclFold.cu) and of the in-process one below.
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

// A collective step's device scratch: the staging of packed operands and the fold's rows, each
// allocated on first use and grown when a call needs more.
template <class Api>
struct CollectiveScratch {
  std::shared_ptr<std::byte> staged, folded;
  size_t stagedBytes = 0, foldedBytes = 0;
  void* staging(const KernelCall& call, size_t bytes) { return grown(call, staged, stagedBytes, bytes); }
  void* rows(const KernelCall& call, size_t bytes) { return grown(call, folded, foldedBytes, bytes); }
  static void* grown(const KernelCall& call, std::shared_ptr<std::byte>& buffer, size_t& have, size_t bytes) {
    if (!buffer || have < bytes) buffer = Api::allocate(call, std::max<size_t>(bytes, 1)), have = bytes;
    return buffer.get();
  }
};

template <class Api>
CollectiveScratch<Api>& collectiveScratch(KernelCall& call) {
  if (!call.cache) call.cache = std::make_shared<CollectiveScratch<Api>>();
  return *static_cast<CollectiveScratch<Api>*>(call.cache.get());
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
  // One replica (a pmap over one device): the fold of its one row is the row itself (a mean
  // divides by 1), so nothing waits on the host and the step stays in one graph.
  if (comm.size() == 1) return;
  Api::synchronize(call);  // this replica's operand is ready
  std::vector<const void*> peers = pointersOf(comm, what).exchange(data, what);
  const int n = comm.size(), me = comm.rank();
  const size_t e = dtypeSize(dtype);
  const int64_t per = (count + n - 1) / n;
  const int64_t begin = std::min<int64_t>(count, per * me), mine = std::min<int64_t>(count, begin + per) - begin;
  if (mine > 0) {
    auto* rows = static_cast<std::byte*>(collectiveScratch<Api>(call).rows(call, size_t(n) * mine * e));
    for (int r = 0; r < n; ++r)  // the receives: row r is replica r's values of this slice
      Api::copy(call, rows + size_t(r) * mine * e, static_cast<const std::byte*>(peers[r]) + begin * e, mine * e);
    std::byte* out = static_cast<std::byte*>(data) + begin * e;
    if (dtype == DType::f32)
      Api::forEach(call, mine, FoldRowsFn<float>{reinterpret_cast<const float*>(rows), n, mine, op, reinterpret_cast<float*>(out)});
    else if (dtype == DType::f64)
      Api::forEach(call, mine, FoldRowsFn<double>{reinterpret_cast<const double*>(rows), n, mine, op, reinterpret_cast<double*>(out)});
    else
      Api::forEach(call, mine, FoldRowsFn<int32_t>{reinterpret_cast<const int32_t*>(rows), n, mine, op, reinterpret_cast<int32_t*>(out)});
    for (int r = 0; r < n; ++r)  // the sends: the folded slice into every other replica's buffer
      if (r != me) Api::copy(call, static_cast<std::byte*>(const_cast<void*>(peers[r])) + begin * e, out, mine * e);
  }
  Api::synchronize(call);
  comm.barrier(what);  // every slice is written before anyone reads or reuses the buffers
}

template <class Api>
void all_reduce(KernelCall& call) {
  Reduction op = attrsOf<AllReduceAttrs>(call.step).reduction;
  DType dtype = call.in[0].dtype;
  if (call.in.size() == 1) {
    Api::copy(call, call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(dtype));
    reduceInPlace<Api>(call, call.out[0].data, dtype, call.out[0].numel(), op);
    return;
  }
  int64_t total = 0;
  for (const TensorView& v : call.in) total += v.numel();
  auto* staging = static_cast<std::byte*>(collectiveScratch<Api>(call).staging(call, total * dtypeSize(dtype)));
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
  if (comm.size() == 1) {  // one replica: its own value (no rendezvous, no host wait)
    Api::copy(call, call.out[0].data, call.in[0].data, bytes);
    return;
  }
  Api::synchronize(call);
  std::vector<const void*> sources = pointersOf(comm, what).exchange(call.in[0].data, what);
  for (int r = 0; r < comm.size(); ++r) Api::copy(call, call.out[0].as<std::byte>() + r * bytes, sources[r], bytes);
  Api::synchronize(call);
  comm.barrier(what);  // inputs stay alive until every replica has copied them
}

// Sum (or mean) over replicas of input[N, ...], keeping this replica's row (a full all-reduce of a copy).
template <class Api>
void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  auto* staging = static_cast<std::byte*>(collectiveScratch<Api>(call).staging(call, bytes));
  Api::copy(call, staging, call.in[0].data, bytes);
  reduceInPlace<Api>(call, staging, call.in[0].dtype, call.in[0].numel(), attrsOf<AllReduceAttrs>(call.step).reduction);
  size_t row = bytes / comm.size();
  Api::copy(call, call.out[0].data, staging + comm.rank() * row, row);
}

// The source's operand (or zeros): read straight from its device pointer, or with NCCL from
// an all-gather into staging.
template <class Api>
void ppermute(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  const size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  const int64_t source = ppermuteSource(attrsOf<PpermuteAttrs>(call.step).pairs, comm.rank());
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL
    auto* staging = static_cast<std::byte*>(collectiveScratch<Api>(call).staging(call, bytes * size_t(comm.size())));
    library->allGather(call.in[0].data, staging, bytes, Api::nativeStream(call), what);
    if (source < 0) Api::zero(call, call.out[0].data, bytes);
    else Api::copy(call, call.out[0].data, staging + size_t(source) * bytes, bytes);
    return;
  }
  if (comm.size() == 1) {
    if (source < 0) Api::zero(call, call.out[0].data, bytes);
    else Api::copy(call, call.out[0].data, call.in[0].data, bytes);
    return;
  }
  Api::synchronize(call);
  std::vector<const void*> sources = pointersOf(comm, what).exchange(call.in[0].data, what);
  if (source < 0) Api::zero(call, call.out[0].data, bytes);
  else Api::copy(call, call.out[0].data, sources[size_t(source)], bytes);
  Api::synchronize(call);
  comm.barrier(what);  // inputs stay alive until every replica has copied its source's
}

// Every replica's operand into staging ([replica, ...]: NCCL's all-gather, the device pointers,
// or the host communicator's all-gather), then one strided gather: the result viewed with its
// concat axis cut into (replica, block) reads staging at the replica's row, this replica's
// chunk along the split axis.
template <class Api>
void all_to_all(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  const TensorView& in = call.in[0];
  const size_t bytes = in.numel() * dtypeSize(in.dtype);
  const int n = comm.size();
  auto* staging = static_cast<std::byte*>(collectiveScratch<Api>(call).staging(call, bytes * size_t(n)));
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL
    library->allGather(in.data, staging, bytes, Api::nativeStream(call), what);
  } else if (n == 1) {
    Api::copy(call, staging, in.data, bytes);
  } else if (PointerExchange* exchange = comm.pointers()) {
    Api::synchronize(call);
    std::vector<const void*> sources = exchange->exchange(in.data, what);
    for (int r = 0; r < n; ++r) Api::copy(call, staging + size_t(r) * bytes, sources[size_t(r)], bytes);
    Api::synchronize(call);
    comm.barrier(what);  // inputs stay alive until every replica has copied them
  } else {  // a host communicator across processes (host-memory devices)
    comm.allGather(in.data, staging, bytes, what).wait();
  }
  const AllToAllAttrs& attrs = attrsOf<AllToAllAttrs>(call.step);
  const int64_t split = attrs.split_axis, concat = attrs.concat_axis;
  const int64_t chunk = in.dim(size_t(split)) / n;
  std::vector<int64_t> strides = rowMajorStrides(in);
  if (in.rank() + 1 > size_t(kMaxRank))
    throw Error("all_to_all supports rank <= " + std::to_string(kMaxRank - 1) + ", got rank " + std::to_string(in.rank()));
  Gather g{0, {}, {}};
  for (size_t d = 0; d < in.rank(); ++d) {
    if (int64_t(d) == concat) g.dims[g.rank] = n, g.strides[g.rank++] = in.numel();
    g.dims[g.rank] = int64_t(d) == split ? chunk : in.dim(d), g.strides[g.rank++] = strides[d];
  }
  const size_t base = size_t(comm.rank()) * size_t(chunk) * size_t(strides[size_t(split)]) * dtypeSize(in.dtype);
  const int64_t count = call.out[0].numel();
  if (dtypeSize(in.dtype) == 8)
    Api::forEach(call, count, GatherFn<int64_t>{reinterpret_cast<const int64_t*>(staging + base), call.out[0].as<int64_t>(), g});
  else if (dtypeSize(in.dtype) == 4)
    Api::forEach(call, count, GatherFn<int32_t>{reinterpret_cast<const int32_t*>(staging + base), call.out[0].as<int32_t>(), g});
  else
    Api::forEach(call, count, GatherFn<int16_t>{reinterpret_cast<const int16_t*>(staging + base), call.out[0].as<int16_t>(), g});
}

struct FillFn {
  int32_t* y;
  int32_t value;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = value; }
};

template <class Api>
void axis_index(KernelCall& call) {
  Api::forEach(call, 1, FillFn{call.out[0].as<int32_t>(), axisIndexOf(call)});
}

#define SPMD_LIBRARY_COLLECTIVE_OPS(X) X(all_reduce) X(all_gather) X(reduce_scatter) X(ppermute) X(all_to_all) X(axis_index)

}  // namespace spmd::runtime::kernels
