// Collectives for replicas that share one process (cuda:0*N, sim:N): each replica gathers its
// own slice of the elements from every replica into rows, folds them with the fold tree
// (FoldRowsFn, the kernel NCCL's exact mode folds its received rows with,
// runtime/cuda/Nccl.cpp) and copies the result into every replica's buffer: NCCL's exact
// algorithm with device copies for its sends and receives, so every replica holds the same bits
// and one fold kernel serves both. A combined all_reduce packs its operands into one flat device
// buffer first.
//
// Where the replicas meet. On the devices (an Api with kDeviceRendezvousReplicas: the simulator,
// CUDA up to 8 replicas):
// each collective step owns, per replica, a staging buffer the others read and write and a
// rendezvous barrier: a one-thread kernel that counts its arrival in host-visible memory and
// waits until every replica's count has reached its own (Rendezvous below). Its addresses are
// exchanged once, on the step's first call; after that the step queues copies and kernels only,
// so nothing waits on the host and the training step of several replicas is one graph per step
// (runtime/exec/StepGraph.h). A replica that does not arrive within the group's timeout, or an
// aborted group, stops the waiting kernel, and the step's deferred check reports it after the
// step. SPMD_DEVICE_RENDEZVOUS=0 meets on the host instead: publish the operand's pointer (after
// waiting for the stream), copy, wait again, barrier; that splits the graphs at every collective.
#pragma once

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Shape.h"
#include "runtime/device/Communicator.h"
#include "runtime/device/Fold.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

// out[i] = the fold tree's root over rows[0][i], ..., rows[n-1][i] (row r at rows + r * count):
// the fold of NCCL's exact all-reduce (runtime/cuda/NcclFold.cu) and of the in-process one below.
// A mean divides by `divisor` (0: n); rows that are subtrees of several leaves each (gradient
// accumulation's replicas, Communicator::leavesPerRank) fold as n leaves do, and divide by all.
template <typename T>
struct FoldRowsFn {
  const T* rows;
  int n;
  int64_t count;
  Reduction op;
  T* out;
  int divisor = 0;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const T* r0 = rows + i;
    const int64_t stride = count;
    out[i] = foldLeaves<T>(n, [&](int r) { return r0[r * stride]; }, op, divisor > 0 ? divisor : n);
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
  std::shared_ptr<void> rendezvous;  // the step's Rendezvous<Api>, made on its first call
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

// The most replicas a device-side rendezvous waits for (its kernel holds their addresses).
constexpr int kMaxRendezvousReplicas = 64;
// What the barrier records in the step's flag (decodeBadIndex's position; the index is the
// replica it waited for): the lowest position is kept, so a timeout wins over an abort.
constexpr int64_t kRendezvousTimedOut = 0, kRendezvousAborted = 1;

#if defined(__CUDA_ARCH__)
__device__ inline uint64_t globalNanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

// The barrier: this replica's arrival count goes up by one (its earlier work on the stream, the
// staging copies, published first), then it waits for every replica's count to reach it. One
// thread; the counts live in host-visible memory, each written by its replica's kernels alone.
struct RendezvousFn {
  RendezvousWords* mine;
  const RendezvousWords* words[kMaxRendezvousReplicas];  // every replica's, this one's included
  int replicas;
  int64_t timeoutNs;
  BadIndexFlag* flag;  // device memory: a replica that never came, or the group's abort
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    if (i != 0) return;
#if defined(__CUDA_ARCH__)
    if (*reinterpret_cast<const volatile BadIndexFlag*>(flag)) return;  // an earlier barrier of this call failed
    volatile uint32_t* own = &mine->arrived;
    const uint32_t count = *own + 1;
    __threadfence_system();
    *own = count;
    const uint64_t start = globalNanoseconds();
    for (int r = 0; r < replicas; ++r) {
      const volatile uint32_t* theirs = &words[r]->arrived;
      while (int32_t(*theirs - count) < 0) {
        if (*reinterpret_cast<const volatile uint32_t*>(&mine->aborted)) return void(indexValid(r, kRendezvousAborted, 0, flag));
        if (int64_t(globalNanoseconds() - start) > timeoutNs) return void(indexValid(r, kRendezvousTimedOut, 0, flag));
        __nanosleep(256);
      }
    }
    __threadfence_system();
#else
    if (__atomic_load_n(flag, __ATOMIC_RELAXED)) return;  // an earlier barrier of this call failed
    const uint32_t count = __atomic_load_n(&mine->arrived, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&mine->arrived, count, __ATOMIC_RELEASE);
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < replicas; ++r)
      while (int32_t(__atomic_load_n(&words[r]->arrived, __ATOMIC_ACQUIRE) - count) < 0) {
        if (__atomic_load_n(&mine->aborted, __ATOMIC_ACQUIRE)) return void(indexValid(r, kRendezvousAborted, 0, flag));
        if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(timeoutNs))
          return void(indexValid(r, kRendezvousTimedOut, 0, flag));
        std::this_thread::yield();
      }
#endif
  }
};

// dst[i] = src[i] unless the call's barrier failed (`flag` set): after a failed barrier a
// replica touches no other replica's memory, nor its own staging, which others may be writing.
template <typename U>
struct CopyIfMetFn {
  const BadIndexFlag* flag;
  U* dst;
  const U* src;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
#if defined(__CUDA_ARCH__)
    if (*reinterpret_cast<const volatile BadIndexFlag*>(flag) == 0) dst[i] = src[i];
#else
    if (__atomic_load_n(flag, __ATOMIC_RELAXED) == 0) dst[i] = src[i];
#endif
  }
};

// A collective step's meeting place on the devices: this replica's staging buffer and words,
// every replica's addresses, the barrier and its flag.
template <class Api>
struct Rendezvous {
  struct Addresses {
    std::byte* staging;
    RendezvousWords* words;
  };
  std::shared_ptr<std::byte> staging, words, flag;
  std::shared_ptr<void> watching;  // the group's watch of `words` (released before them)
  size_t bytes = 0;
  Addresses mine{};
  std::vector<std::byte*> stagingOf;  // by rank
  RendezvousFn barrier{};
  // Clears the flag: the first thing a call queues.
  void begin(const KernelCall& call) const { Api::zero(call, flag.get(), sizeof(BadIndexFlag)); }
  void meet(const KernelCall& call) const { Api::forEach(call, 1, barrier); }
  // A copy after a barrier: done only if every barrier of the call so far was met (CopyIfMetFn),
  // in the widest words the pointers and size allow.
  void copy(const KernelCall& call, void* dst, const void* src, size_t bytes) const {
    const auto* f = reinterpret_cast<const BadIndexFlag*>(flag.get());
    auto run = [&](auto unit) {
      using U = decltype(unit);
      Api::forEach(call, int64_t(bytes / sizeof(U)), CopyIfMetFn<U>{f, static_cast<U*>(dst), static_cast<const U*>(src)});
    };
    const uintptr_t all = reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes;
    if (all % 8 == 0) run(uint64_t{});
    else if (all % 4 == 0) run(uint32_t{});
    else if (all % 2 == 0) run(uint16_t{});
    else run(uint8_t{});
  }
  // The flag read after the step (or now, where the executor takes no deferred checks).
  void check(KernelCall& call, const std::string& what, int rank) const {
    const double seconds = double(barrier.timeoutNs) * 1e-9;
    auto report = [what, rank, seconds](int32_t replica, int64_t why) {
      if (why == kRendezvousAborted)
        throw ReplicaAborted("replica " + std::to_string(rank) + " stopped in " + what + " because the group failed");
      throw Error(what + " timed out after " + std::to_string(seconds).substr(0, 6) + " s on replica " +
                  std::to_string(rank) + ": replica " + std::to_string(replica) +
                  " never reached it (stuck, or running a different sequence of collectives); raise the limit with "
                  "SPMD_COLLECTIVE_TIMEOUT=<seconds> if a step is legitimately that slow");
    };
    deferOrCheck<Api>(call, reinterpret_cast<const BadIndexFlag*>(flag.get()), report);
  }
};

// The step's rendezvous for `bytes` of staging, made on its first call (allocations, then one
// exchange of addresses on the host), or null where the replicas meet on the host instead.
template <class Api>
Rendezvous<Api>* rendezvousOf(KernelCall& call, Communicator& comm, size_t bytes, const std::string& what) {
  static_assert(Api::kDeviceRendezvousReplicas <= kMaxRendezvousReplicas);
  if constexpr (Api::kDeviceRendezvousReplicas == 0) {
    return nullptr;
  } else {
    PointerExchange* exchange = comm.pointers();
    if (!exchange || comm.size() > Api::kDeviceRendezvousReplicas || !deviceRendezvousWanted()) return nullptr;
    std::shared_ptr<void>& slot = collectiveScratch<Api>(call).rendezvous;
    if (slot) {
      auto* r = static_cast<Rendezvous<Api>*>(slot.get());
      if (r->bytes != bytes)
        throw Error(what + ": its operand changed size between calls (" + std::to_string(r->bytes) + " then " +
                    std::to_string(bytes) + " bytes)");
      return r;
    }
    auto r = std::make_shared<Rendezvous<Api>>();
    r->bytes = bytes;
    r->staging = Api::allocate(call, std::max<size_t>(bytes, 1));
    r->flag = Api::allocate(call, sizeof(BadIndexFlag));
    r->words = Api::allocateHostVisible(call, sizeof(RendezvousWords));
    r->mine = {r->staging.get(), reinterpret_cast<RendezvousWords*>(r->words.get())};
    r->watching = exchange->watch(r->mine.words);
    const std::vector<const void*> all = exchange->exchange(&r->mine, what);
    r->barrier.mine = r->mine.words;
    r->barrier.replicas = comm.size();
    r->barrier.timeoutNs = int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(exchange->timeout()).count());
    r->barrier.flag = reinterpret_cast<BadIndexFlag*>(r->flag.get());
    for (int k = 0; k < comm.size(); ++k) {
      const auto* theirs = static_cast<const typename Rendezvous<Api>::Addresses*>(all[size_t(k)]);
      r->stagingOf.push_back(theirs->staging);
      r->barrier.words[k] = theirs->words;
    }
    // Every replica has copied the addresses before any `mine` could go (a later exchange).
    slot = r;
    return r.get();
  }
}

// Every replica's `bytes` of `operand` made readable to all, `read(sources, copy)` queued with
// their addresses in rank order (it copies from them with copy(dst, src, bytes)), and the replicas met again, so that none changes its operand's copy
// (or frees the operand) while another reads it: on the devices, each operand copied into its
// replica's staging between two barriers; on the host, the operands' own pointers exchanged
// after waiting for the stream.
template <class Api, class Read>
void readEveryReplica(KernelCall& call, Communicator& comm, const void* operand, size_t bytes,
                      const std::string& what, Read read) {
  if (Rendezvous<Api>* meeting = rendezvousOf<Api>(call, comm, bytes, what)) {
    meeting->begin(call);
    Api::copy(call, meeting->mine.staging, operand, bytes);
    meeting->meet(call);
    read(std::vector<const void*>(meeting->stagingOf.begin(), meeting->stagingOf.end()),
         [&](void* dst, const void* src, size_t n) { meeting->copy(call, dst, src, n); });
    meeting->meet(call);
    meeting->check(call, what, comm.rank());
    return;
  }
  Api::synchronize(call);
  read(pointersOf(comm, what).exchange(operand, what), [&](void* dst, const void* src, size_t n) { Api::copy(call, dst, src, n); });
  Api::synchronize(call);
  comm.barrier(what);  // operands stay alive until every replica has read them
}

// out = the fold of `rows` (n rows of `count` elements, contiguous), in the element type; a mean
// divides by n times the leaves each row stands for.
template <class Api>
void foldRows(KernelCall& call, const void* rows, int n, int64_t count, DType dtype, Reduction op, void* out,
              int leaves = 1) {
  const int divisor = n * leaves;
  if (dtype == DType::f32)
    Api::forEach(call, count, FoldRowsFn<float>{static_cast<const float*>(rows), n, count, op, static_cast<float*>(out), divisor});
  else if (dtype == DType::f64)
    Api::forEach(call, count, FoldRowsFn<double>{static_cast<const double*>(rows), n, count, op, static_cast<double*>(out), divisor});
  else
    Api::forEach(call, count, FoldRowsFn<int32_t>{static_cast<const int32_t*>(rows), n, count, op, static_cast<int32_t*>(out), divisor});
}

// Reduces `count` elements at `data` (this replica's device memory) across the replicas, or,
// with `members` (this replica's group, in the group's order), across its group alone: the
// member at position p folds the p-th of G slices from the members' operands and sends it to
// the others (all replicas still meet, each reading its own group's buffers only).
template <class Api>
void reduceInPlace(KernelCall& call, void* data, DType dtype, int64_t count, Reduction op,
                   const std::vector<int64_t>& members = {}) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  const size_t e = dtypeSize(dtype);
  // Each replica's operand is the root of its micro-batches' subtree (gradient accumulation).
  const int leaves = comm.leavesPerRank();
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL
    if (leaves != 1)
      throw Error(what + ": NCCL's all-reduce folds one leaf per replica; gradient accumulation over " +
                  std::to_string(leaves) + " micro-batches does not run on it yet");
    if (members.empty()) {
      library->allReduce(data, dtype, count, op, Api::nativeStream(call), what);
      return;
    }
    // Within a group: every replica's operand gathered, the group's rows folded here.
    const size_t bytes = size_t(count) * e;
    auto* all = static_cast<std::byte*>(collectiveScratch<Api>(call).rows(call, bytes * size_t(comm.size() + members.size())));
    std::byte* rows = all + bytes * size_t(comm.size());
    library->allGather(data, all, bytes, Api::nativeStream(call), what);
    for (size_t k = 0; k < members.size(); ++k) Api::copy(call, rows + k * bytes, all + size_t(members[k]) * bytes, bytes);
    foldRows<Api>(call, rows, int(members.size()), count, dtype, op, data);
    return;
  }
  // One replica (a pmap over one device), or a group of one: the fold of its one row is the row
  // itself (a mean divides by 1, or by the leaves it stands for), so nothing waits on the host
  // and the step stays in one graph.
  if (comm.size() == 1 || members.size() == 1) {
    if (leaves > 1 && op == Reduction::Mean) foldRows<Api>(call, data, 1, count, dtype, op, data, leaves);
    return;
  }
  std::vector<int64_t> group = members;
  if (group.empty())
    for (int r = 0; r < comm.size(); ++r) group.push_back(r);
  const int n = int(group.size()), me = comm.rank();
  const int position = int(std::find(group.begin(), group.end(), int64_t(me)) - group.begin());
  Rendezvous<Api>* meeting = rendezvousOf<Api>(call, comm, size_t(count) * e, what);
  std::vector<const void*> peers;
  if (meeting) {
    meeting->begin(call);
    Api::copy(call, meeting->mine.staging, data, size_t(count) * e);
    meeting->meet(call);  // every replica's operand is in its staging
    peers.assign(meeting->stagingOf.begin(), meeting->stagingOf.end());
  } else {
    Api::synchronize(call);  // this replica's operand is ready
    peers = pointersOf(comm, what).exchange(data, what);
  }
  std::byte* target = meeting ? meeting->mine.staging : static_cast<std::byte*>(data);
  const int64_t per = (count + n - 1) / n;
  const int64_t begin = std::min<int64_t>(count, per * position), mine = std::min<int64_t>(count, begin + per) - begin;
  if (mine > 0) {
    auto* rows = static_cast<std::byte*>(collectiveScratch<Api>(call).rows(call, size_t(n) * mine * e));
    auto copy = [&](void* dst, const void* src, size_t bytes) {
      if (meeting) meeting->copy(call, dst, src, bytes);
      else Api::copy(call, dst, src, bytes);
    };
    for (int k = 0; k < n; ++k)  // the receives: row k is the k-th member's values of this slice
      copy(rows + size_t(k) * mine * e, static_cast<const std::byte*>(peers[size_t(group[k])]) + begin * e, mine * e);
    std::byte* out = target + begin * e;
    foldRows<Api>(call, rows, n, mine, dtype, op, out, leaves);
    for (int k = 0; k < n; ++k)  // the sends: the folded slice into every other member's buffer
      if (group[k] != me) copy(static_cast<std::byte*>(const_cast<void*>(peers[size_t(group[k])])) + begin * e, out, mine * e);
  }
  if (meeting) {
    meeting->meet(call);  // every slice is written before anyone reads or reuses the buffers
    meeting->copy(call, data, meeting->mine.staging, size_t(count) * e);
    meeting->check(call, what, me);
    return;
  }
  Api::synchronize(call);
  comm.barrier(what);  // every slice is written before anyone reads or reuses the buffers
}

template <class Api>
void all_reduce(KernelCall& call) {
  const AllReduceAttrs& attrs = attrsOf<AllReduceAttrs>(call.step);
  Reduction op = attrs.reduction;
  DType dtype = call.in[0].dtype;
  const std::vector<int64_t> members = attrs.replica_groups.empty()
                                           ? std::vector<int64_t>()
                                           : groupMembers(attrs.replica_groups, attrs.group_size, communicatorOf(call).rank());
  if (call.in.size() == 1) {
    Api::copy(call, call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(dtype));
    reduceInPlace<Api>(call, call.out[0].data, dtype, call.out[0].numel(), op, members);
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
  reduceInPlace<Api>(call, staging, dtype, total, op, members);
  offset = 0;
  for (const TensorView& v : call.out) {
    Api::copy(call, v.data, staging + offset, v.numel() * dtypeSize(dtype));
    offset += v.numel() * dtypeSize(dtype);
  }
}

// Every replica's operand stacked, or within replica groups the members' operands in the group's
// order (each replica reading its group's alone; with NCCL, every operand gathered first).
template <class Api>
void all_gather(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  const AllGatherAttrs& attrs = attrsOf<AllGatherAttrs>(call.step);
  const std::vector<int64_t> members = groupOrAll(attrs.replica_groups, attrs.group_size, comm);
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL
    if (attrs.replica_groups.empty()) {
      library->allGather(call.in[0].data, call.out[0].data, bytes, Api::nativeStream(call), what);
      return;
    }
    auto* all = static_cast<std::byte*>(collectiveScratch<Api>(call).rows(call, bytes * size_t(comm.size())));
    library->allGather(call.in[0].data, all, bytes, Api::nativeStream(call), what);
    for (size_t k = 0; k < members.size(); ++k)
      Api::copy(call, call.out[0].as<std::byte>() + k * bytes, all + size_t(members[k]) * bytes, bytes);
    return;
  }
  if (comm.size() == 1 || members.size() == 1) {  // its own value (no rendezvous, no host wait)
    Api::copy(call, call.out[0].data, call.in[0].data, bytes);
    return;
  }
  readEveryReplica<Api>(call, comm, call.in[0].data, bytes, what, [&](const std::vector<const void*>& sources, auto copy) {
    for (size_t k = 0; k < members.size(); ++k)
      copy(call.out[0].as<std::byte>() + k * bytes, sources[size_t(members[k])], bytes);
  });
}

// Sum (or mean) over replicas of input[N, ...], keeping this replica's row (a full all-reduce of a copy).
// Within replica groups the same over the group's members, keeping the row at this replica's
// position in its group.
template <class Api>
void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  const ReduceScatterAttrs& attrs = attrsOf<ReduceScatterAttrs>(call.step);
  std::vector<int64_t> members;
  int64_t position = comm.rank(), rows = comm.size();
  if (!attrs.replica_groups.empty()) {
    members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
    position = std::find(members.begin(), members.end(), int64_t(comm.rank())) - members.begin();
    rows = int64_t(members.size());
  }
  auto* staging = static_cast<std::byte*>(collectiveScratch<Api>(call).staging(call, bytes));
  Api::copy(call, staging, call.in[0].data, bytes);
  reduceInPlace<Api>(call, staging, call.in[0].dtype, call.in[0].numel(), attrs.reduction, members);
  size_t row = bytes / size_t(rows);
  Api::copy(call, call.out[0].data, staging + size_t(position) * row, row);
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
  readEveryReplica<Api>(call, comm, call.in[0].data, bytes, what, [&](const std::vector<const void*>& sources, auto copy) {
    if (source < 0) Api::zero(call, call.out[0].data, bytes);
    else copy(call.out[0].data, sources[size_t(source)], bytes);
  });
}

// Each replica's chunks are packed by destination ([replica j, in with the split axis cut to chunk
// j]: the input itself when the split axis is the leading one), exchanged block by block, and
// unpacked along the concat axis (received in place when it is the leading one). The exchange:
// on the host (the CPU's replicas, or a host communicator across processes)
// Communicator::allToAll / allToAllInGroup (in process each replica copies its blocks from the
// others' inputs, across processes each block moves alone); on a device in one process each
// replica copies its block from every member's packed operand (the rendezvous's staging or the
// device pointers). With NCCL every operand goes into staging (its all-gather), then one strided
// gather: the result viewed with its concat axis cut into (member, block) reads staging at the
// member's row, this replica's chunk along the split axis. Within replica groups the members are
// the replica's group, in its order, and its chunk the one at its position in the group.
template <class Api>
void all_to_all(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  std::string what = collectiveWhat(call);
  const TensorView& in = call.in[0];
  const size_t e = dtypeSize(in.dtype), bytes = in.numel() * e;
  if (in.rank() + 1 > size_t(kMaxRank))
    throw Error("all_to_all supports rank <= " + std::to_string(kMaxRank - 1) + ", got rank " + std::to_string(in.rank()));
  const AllToAllAttrs& attrs = attrsOf<AllToAllAttrs>(call.step);
  const bool grouped = !attrs.replica_groups.empty();
  const std::vector<int64_t> members = groupOrAll(attrs.replica_groups, attrs.group_size, comm);
  const int n = int(members.size());
  const int64_t position = std::find(members.begin(), members.end(), int64_t(comm.rank())) - members.begin();
  const int64_t split = attrs.split_axis, concat = attrs.concat_axis;
  const int64_t chunk = in.dim(size_t(split)) / n;
  const Shape strides = rowMajorStrides(in.shape);
  // A run at a time where the innermost dimension is contiguous (in the pack and the unpack
  // unless the split or concat axis is the last).
  auto gatherAs = [&]<typename T>(const std::byte* from, void* to, Gather g) {
    const T* x = reinterpret_cast<const T*>(from);
    if (g.rank > 0 && g.strides[g.rank - 1] == 1 && g.dims[g.rank - 1] > 1) {
      const int64_t run = g.dims[--g.rank];
      Api::forEach(call, in.numel() / run, GatherRunsFn<T>{x, static_cast<T*>(to), g, run});
    } else {
      Api::forEach(call, in.numel(), GatherFn<T>{x, static_cast<T*>(to), g});
    }
  };
  auto gather = [&](const std::byte* from, void* to, const Gather& g) {
    if (e == 8) gatherAs.template operator()<int64_t>(from, to, g);
    else if (e == 4) gatherAs.template operator()<int32_t>(from, to, g);
    else gatherAs.template operator()<int16_t>(from, to, g);
  };
  // The result read from `rows` (n rows of `rowElements`, each laid out with `rowStrides` along
  // in's dimensions, the split one `chunk` long), row k at the concat axis' block k.
  auto unpack = [&](const std::byte* rows, int64_t rowElements, const Shape& rowStrides) {
    Gather g{0, {}, {}};
    for (size_t d = 0; d < in.rank(); ++d) {
      if (int64_t(d) == concat) g.dims[g.rank] = n, g.strides[g.rank++] = rowElements;
      g.dims[g.rank] = int64_t(d) == split ? chunk : in.dim(d), g.strides[g.rank++] = rowStrides[d];
    }
    gather(rows, call.out[0].data, g);
  };
  const bool onHost = Api::kDeviceRendezvousReplicas == 0 || !comm.pointers();
  if (n > 1 && !comm.deviceCollectives()) {
    const bool packed = split == 0, inPlace = concat == 0;
    auto* staging = static_cast<std::byte*>(
        collectiveScratch<Api>(call).staging(call, std::max<size_t>(bytes * ((packed ? 0 : 1) + (inPlace ? 0 : 1)), 1)));
    const std::byte* blocks = static_cast<const std::byte*>(in.data);
    if (!packed) {
      Gather pack{0, {}, {}};  // [member k, in with the split axis cut to chunk k]
      pack.dims[pack.rank] = n, pack.strides[pack.rank++] = chunk * strides[size_t(split)];
      for (size_t d = 0; d < in.rank(); ++d)
        pack.dims[pack.rank] = int64_t(d) == split ? chunk : in.dim(d), pack.strides[pack.rank++] = strides[d];
      gather(blocks, staging, pack);
      blocks = staging;
    }
    std::byte* received = inPlace ? static_cast<std::byte*>(call.out[0].data) : staging + (packed ? 0 : bytes);
    const size_t block = bytes / size_t(n);
    if (!onHost) {  // the device's rendezvous or pointers: the block at this replica's position of each member's
      readEveryReplica<Api>(call, comm, blocks, bytes, what, [&](const std::vector<const void*>& sources, auto copy) {
        for (int k = 0; k < n; ++k)
          copy(received + size_t(k) * block,
               static_cast<const std::byte*>(sources[size_t(members[size_t(k)])]) + size_t(position) * block, block);
      });
    } else if (grouped) {
      comm.allToAllInGroup(blocks, received, block, members, what).wait();
    } else {
      comm.allToAll(blocks, received, block, what).wait();
    }
    if (!inPlace) {
      Shape chunkShape(in.shape.begin(), in.shape.end());
      chunkShape[size_t(split)] = chunk;
      unpack(received, in.numel() / n, rowMajorStrides(chunkShape));
    }
    return;
  }
  auto* staging = static_cast<std::byte*>(collectiveScratch<Api>(call).staging(call, bytes * size_t(n)));
  if (DeviceCollectives* library = comm.deviceCollectives()) {  // NCCL: every replica's, then the members'
    std::byte* all = staging;
    if (grouped) all = static_cast<std::byte*>(collectiveScratch<Api>(call).rows(call, bytes * size_t(comm.size())));
    library->allGather(in.data, all, bytes, Api::nativeStream(call), what);
    if (grouped)
      for (int k = 0; k < n; ++k) Api::copy(call, staging + size_t(k) * bytes, all + size_t(members[size_t(k)]) * bytes, bytes);
  } else {  // one replica (a group of one): its own operand
    Api::copy(call, staging, in.data, bytes);
  }
  unpack(staging + size_t(position) * size_t(chunk) * size_t(strides[size_t(split)]) * e, in.numel(), strides);
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
