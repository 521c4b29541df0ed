// Collectives between threads of one process: the CPU backend's N emulated devices. Each
// collective is a barrier-synchronised exchange through shared pointers; every wait has a
// timeout and wakes at once when any replica aborts, so a failing replica never hangs the rest.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/device/Communicator.h"
#include "runtime/device/Fold.h"

namespace spmd::runtime {

// State shared by the replicas of one group. Create one per group, then one
// InProcessCommunicator per rank.
class InProcessGroup {
 public:
  // Each rank stands for `leavesPerRank` leaves of the fold tree (runtime/device/Fold.h): its
  // accumulation steps, already reduced to their subtree (a power of two).
  InProcessGroup(int size, std::chrono::milliseconds timeout, int leavesPerRank = 1);
  int size() const { return size_; }
  int leavesPerRank() const { return leaves_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Clears a previous failure; only call while no replica is inside a collective.
  void reset();
  // The first error passed to abort() since the last reset, if any.
  std::optional<std::string> failure() const;
  // Device-side rendezvous words (PointerExchange::watch): aborted with the group, cleared by reset.
  void watch(RendezvousWords* words);
  void unwatch(RendezvousWords* words);

 private:
  friend class InProcessCommunicator;
  // Publishes `pointer` for `rank`, waits for all ranks, returns every rank's pointer.
  const std::vector<const void*>& exchange(int rank, const void* pointer, const std::string& what);
  // Waits for all ranks (no data).
  void barrier(int rank, const std::string& what);
  void abort(const std::string& error);

  const int size_, leaves_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<const FoldPlan> plan_;  // the ranks' subtrees to the root
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<const void*> pointers_, published_;
  std::vector<bool> arrived_;
  // When a rank last arrived at the current exchange: a wait times out after timeout_ without an
  // arrival (replicas taking turns, CoreTurns.h, arrive one turn after another).
  std::chrono::steady_clock::time_point lastArrival_;
  int waiting_ = 0;
  // Bumped (release) by the last rank to arrive, under the mutex; a waiting rank first polls it
  // for a few microseconds before it sleeps on wake_ (the wake-up costs tens of microseconds on
  // every collective, and a step has hundreds). `failed_` mirrors failure_ for the polling.
  std::atomic<uint64_t> generation_ = 0;
  std::atomic<bool> failed_ = false;
  std::optional<std::string> failure_;
  std::vector<RendezvousWords*> watched_;  // under mutex_
};

// Every collective completes before it returns (the replicas meet in it), so its Pending is done.
class InProcessCommunicator final : public Communicator, public PointerExchange {
 public:
  InProcessCommunicator(std::shared_ptr<InProcessGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  int leavesPerRank() const override { return group_->leavesPerRank(); }
  Pending allReduce(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                    const std::string& what, bool background = false) override;
  Pending allGather(const void* in, void* out, size_t bytes, const std::string& what, bool background = false) override;
  Pending allReduceInGroup(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                           std::span<const int64_t> members, const std::string& what) override;
  Pending allGatherInGroup(const void* in, void* out, size_t bytes, std::span<const int64_t> members,
                           const std::string& what) override;
  Pending permute(const void* in, void* out, size_t bytes, std::span<const int64_t> pairs,
                  const std::string& what) override;
  Pending allToAll(const void* in, void* out, size_t blockBytes, const std::string& what) override;
  Pending allToAllInGroup(const void* in, void* out, size_t blockBytes, std::span<const int64_t> members,
                          const std::string& what) override;
  Pending reduceScatterInGroup(const void* in, void* out, DType dtype, int64_t count, Reduction op,
                               std::span<const int64_t> members, const std::string& what) override;
  Pending reduceScatter(const void* in, void* out, DType dtype, int64_t count, Reduction op,
                        const std::string& what, bool background = false) override;
  void abort(const std::string& error) override { group_->abort(error); }
  void barrier(const std::string& what) override { group_->barrier(rank_, what); }
  void reset() override { group_->reset(); }
  PointerExchange* pointers() override { return this; }
  std::vector<const void*> exchange(const void* mine, const std::string& what) override {
    return group_->exchange(rank_, mine, what);
  }
  std::shared_ptr<void> watch(RendezvousWords* words) override {
    group_->watch(words);
    return std::shared_ptr<void>(words, [group = group_](void* w) { group->unwatch(static_cast<RendezvousWords*>(w)); });
  }
  std::chrono::milliseconds timeout() const override { return group_->timeout(); }

 private:
  // Reduces this rank's segments into `out` (which may be `in`) over its group's `members`, in
  // their order (empty: every rank).
  void reduceSegments(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                      std::span<const int64_t> members, const std::string& what);

  std::shared_ptr<InProcessGroup> group_;
  int rank_;
  std::vector<std::byte> staging_;  // segments packed into one flat buffer (where results overlap other operands)
  int traceTrack_ = -1;  // this rank's collectives on the timeline: -1 not asked yet, 0 off
};

}  // namespace spmd::runtime
