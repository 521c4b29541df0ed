// Collectives across the replicas of one SPMD program. Each replica holds its own Communicator
// (its rank in the group); every replica must call the same collectives in the same order, which
// the compiler guarantees by giving all replicas one Program. Implementations: in-process threads
// (InProcessCommunicator, for replicas that are threads of one process) and, in a job of several
// processes, ProcessCommunicator (runtime/mpi: threads within a process, MPI between them).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/program/Catalog.h"

namespace spmd::runtime {

// Thrown on a replica that stopped because another replica failed or a collective timed out;
// the group reports the original error, not these.
class ReplicaAborted : public Error {
 public:
  using Error::Error;
};

// Collectives a device library runs on a device's stream (NCCL for cuda replicas on distinct
// GPUs, within a process or across processes). A backend's collective kernels use them, when
// their communicator offers them, instead of exchanging device pointers.
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // In place on device memory, ordered on `stream` (the backend's native stream handle);
  // returns when the result is in `data`. Exact or fast as the job's reduction mode says.
  virtual void allReduce(void* data, DType dtype, int64_t count, Reduction op, void* stream,
                         const std::string& what) = 0;
  // out[r * bytes .. (r + 1) * bytes) = rank r's `in`, device memory on `stream`.
  virtual void allGather(const void* in, void* out, size_t bytes, void* stream, const std::string& what) = 0;
};

// A replica's words of a device-side rendezvous (runtime/kernels/Collectives.h), in memory both
// the host and the devices of the process read: how many times its kernels arrived at the
// collective's barrier (written by its own kernels alone), and whether the group aborted (set by
// the host, which the kernels waiting at the barrier read, so they stop instead of waiting).
struct RendezvousWords {
  uint32_t arrived = 0;
  uint32_t aborted = 0;
};

// For backends whose collectives run as device kernels over every replica's memory (replicas
// that share a process: sim:N, cuda:0*N): every rank's pointer.
class PointerExchange {
 public:
  virtual ~PointerExchange() = default;
  // Publishes `mine`, waits for all ranks, returns every rank's pointer in rank order.
  virtual std::vector<const void*> exchange(const void* mine, const std::string& what) = 0;
  // Words of a device-side rendezvous of this rank, watched while the returned handle lives
  // (it keeps the group alive): set aborted when the group aborts (at once if it has), cleared
  // (both words) when the group is reset.
  virtual std::shared_ptr<void> watch(RendezvousWords* words) = 0;
  // How long a collective waits for the other replicas before it fails.
  virtual std::chrono::milliseconds timeout() const = 0;
};

// Whether in-process collectives meet on the device where the backend's kernels can
// (SPMD_DEVICE_RENDEZVOUS, default on; runtime/kernels/Collectives.h). Read once, by every
// executor before its first step; a collective step takes the setting on its first call.
bool deviceRendezvousWanted();
// Tests: sets it for the steps whose first call comes after (nullopt: the variable's value again).
void setDeviceRendezvous(std::optional<bool> on);

// The collective channel between the replicas: rank and size, three collectives that each
// return a handle to wait on, a barrier, and abort. `what` names the calling op for errors
// ("all_reduce at model.cpp:12").
class Communicator {
 public:
  // Part of a collective's operand or result: `count` elements of the collective's dtype.
  struct Segment {
    void* data;
    int64_t count;
  };
  // A collective in flight: wait() returns once its results are written (throwing its error);
  // a default Pending is already done. A communicator that runs collectives on a thread of its
  // own (ProcessCommunicator, overlap on) may return before they finish, so the caller can run
  // the following steps meanwhile (DDP's bucketed all-reduce behind the backward pass).
  class Pending {
   public:
    Pending() = default;
    explicit Pending(std::function<void()> finish) : finish_(std::move(finish)) {}
    // Whether wait() has nothing left to do (the collective finished inside the call).
    bool done() const { return !finish_; }
    void wait() {
      if (!finish_) return;
      std::function<void()> finish = std::move(finish_);
      finish_ = nullptr;
      finish();
    }

   private:
    std::function<void()> finish_;
  };

  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The segments of `in`, one flat vector per replica, reduced over the replicas element by
  // element into the segments of `out` (the same counts; `out` may be `in`). The same bits on
  // every replica and from run to run (the fold tree, runtime/device/Fold.h). `in` may change
  // once the call returns; `out` holds the result after wait(). `background`: the caller runs
  // other work before wait(), so a communicator with a thread of its own may reduce behind it.
  virtual Pending allReduce(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                            const std::string& what, bool background = false) = 0;
  // out[r * bytes .. (r + 1) * bytes) = replica r's `in` (stacked in rank order). `in` may change
  // once the call returns; `out` holds the result after wait(); `background` as allReduce's.
  virtual Pending allGather(const void* in, void* out, size_t bytes, const std::string& what,
                            bool background = false) = 0;
  // The sum (or mean: `op`) over the replicas of `in` (`count` elements: size() rows), this
  // replica's row into `out`, each element folded as allReduce folds it (the same bits). By
  // default an all-reduce of a copy (`background` as allReduce's); the in-process communicator
  // folds this replica's row alone.
  virtual Pending reduceScatter(const void* in, void* out, DType dtype, int64_t count, Reduction op,
                                const std::string& what, bool background = false);
  // The segments reduced over this replica's group alone (an all_reduce within replica groups):
  // `members` are the group's ranks in the group's order; every rank calls it at the same point
  // with its own group, the groups holding every rank once. Each element is folded over the fold
  // tree of members.size() leaves in that order (a mean divides by it): the bits of allReduce over
  // a group of just those replicas. By default an all-gather of every rank's operand and a fold of
  // the group's rows; the in-process communicator folds straight from the group's buffers.
  virtual Pending allReduceInGroup(std::span<const Segment> in, std::span<const Segment> out, DType dtype,
                                   Reduction op, std::span<const int64_t> members, const std::string& what);
  // Within groups as allReduceInGroup: out[k * bytes .. (k + 1) * bytes) = the k-th member's `in`.
  virtual Pending allGatherInGroup(const void* in, void* out, size_t bytes, std::span<const int64_t> members,
                                   const std::string& what);
  // Within groups: `in` holds members.size() rows (`count` elements in all); the member at
  // position p gets the fold of the members' rows p into `out`, over the tree of the group's size
  // in the group's order (a mean divides by it).
  virtual Pending reduceScatterInGroup(const void* in, void* out, DType dtype, int64_t count, Reduction op,
                                       std::span<const int64_t> members, const std::string& what);
  // ppermute: `out` = the operand of the replica r whose pair (r, this rank) is in `pairs`
  // (flattened source, target pairs), or zeros where there is none. By default through an
  // all-gather; the in-process communicator copies the source's operand alone, and across
  // processes only the operands whose pair crosses processes move.
  virtual Pending permute(const void* in, void* out, size_t bytes, std::span<const int64_t> pairs,
                          const std::string& what);
  // all_to_all of blocks: `in` holds size() blocks of `blockBytes`, block j for replica j; block j
  // of `out` is replica j's block for this replica. By default through an all-gather; in process
  // each replica copies its blocks from the others' inputs, and across processes each block
  // moves alone.
  virtual Pending allToAll(const void* in, void* out, size_t blockBytes, const std::string& what);
  // all_to_all within this replica's group (`members`, in the group's order): `in` holds one
  // block for each member; block k of `out` is member k's block at this replica's position.
  virtual Pending allToAllInGroup(const void* in, void* out, size_t blockBytes, std::span<const int64_t> members,
                                  const std::string& what);
  // Waits until every rank has arrived.
  virtual void barrier(const std::string& what) = 0;
  // Marks the group failed with this replica's error: every replica waiting in (or later
  // entering) a collective throws ReplicaAborted instead of waiting.
  virtual void abort(const std::string& error) = 0;
  // Clears a previous abort before the next run; only called while no rank is in a collective.
  virtual void reset() {}
  // What backends whose collectives run as device kernels use instead of the host collectives
  // above: the replicas' device pointers, or a device library (nullptr where this communicator
  // has none).
  virtual PointerExchange* pointers() { return nullptr; }
  virtual DeviceCollectives* deviceCollectives() { return nullptr; }
  // The leaves of the fold tree each replica stands for (gradient accumulation's micro-batches,
  // already folded into one subtree root per replica; runtime/device/Fold.h): a mean divides by
  // size() times this.
  virtual int leavesPerRank() const { return 1; }
  // The replica index the program's axis_index sees: rank() unless the replica runs virtual
  // replicas one after another (gradient accumulation: virtual replica rank * steps + step).
  int virtualRank() const { return rank() * virtualSteps_ + virtualStep_; }
  void setVirtualStep(int step, int steps) { virtualStep_ = step, virtualSteps_ = steps; }

  // Reduces `data` in place (one segment): a convenience over allReduce that waits.
  void allReduceInPlace(void* data, DType dtype, int64_t count, Reduction op, const std::string& what) {
    Segment s{data, count};
    allReduce({&s, 1}, {&s, 1}, dtype, op, what).wait();
  }

 private:
  int virtualStep_ = 0, virtualSteps_ = 1;
};

// The ranks of `rank`'s group, in the group's order, from an all_reduce's flattened replica
// groups of `groupSize` (checked by checkProgram: every rank in exactly one group).
std::vector<int64_t> groupMembers(const std::vector<int64_t>& groups, int64_t groupSize, int rank);
// The same, or every rank of `comm` in order where the step has no replica groups.
std::vector<int64_t> groupOrAll(const std::vector<int64_t>& groups, int64_t groupSize, const Communicator& comm);

}  // namespace spmd::runtime
