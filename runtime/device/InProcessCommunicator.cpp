// InProcessCommunicator: pointer exchange under one mutex, then each rank reduces its own slice
// of the elements over all ranks with the fold tree (runtime/device/Fold.h) and writes the result to every
// rank's buffer, so all replicas hold the same bits and the order never depends on timing.
#include "runtime/device/InProcessCommunicator.h"

#include "runtime/base/CopyBytes.h"
#include "runtime/base/Error.h"
#include "runtime/base/PollBriefly.h"
#include "runtime/base/Timeline.h"
#include "runtime/device/CoreTurns.h"

#include "runtime/device/Fold.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace spmd::runtime {
namespace {
// Elements a thread folds at a time where one replica folds its operands alone.
constexpr int64_t kFoldBlock = 1 << 16;
}  // namespace

InProcessGroup::InProcessGroup(int size, std::chrono::milliseconds timeout, int leavesPerRank)
    : size_(size), leaves_(leavesPerRank), timeout_(timeout), pointers_(size), arrived_(size) {
  if (size < 1) throw Error("a replica group needs at least one replica, got " + std::to_string(size));
  if (leavesPerRank < 1 || (leavesPerRank & (leavesPerRank - 1)) != 0)
    throw Error("accumulation over " + std::to_string(leavesPerRank) + " steps: use a power of two (1, 2, 4, ...), "
                "so each replica's steps form one subtree of the fold tree");
  std::vector<FoldNode> nodes;
  int level = 0;
  while ((1 << level) < leavesPerRank) ++level;
  for (int r = 0; r < size; ++r) nodes.push_back({level, r});
  plan_ = std::make_shared<FoldPlan>(nodes, true);
}

void InProcessGroup::reset() {
  std::lock_guard lock(mutex_);
  failure_.reset();
  failed_ = false;
  waiting_ = 0;
  std::fill(arrived_.begin(), arrived_.end(), false);
  for (RendezvousWords* words : watched_) {
    __atomic_store_n(&words->arrived, 0u, __ATOMIC_RELEASE);
    __atomic_store_n(&words->aborted, 0u, __ATOMIC_RELEASE);
  }
}

// The words are host-visible memory a device kernel may be reading: atomic stores.
void InProcessGroup::watch(RendezvousWords* words) {
  std::lock_guard lock(mutex_);
  watched_.push_back(words);
  if (failure_) __atomic_store_n(&words->aborted, 1u, __ATOMIC_RELEASE);
}

void InProcessGroup::unwatch(RendezvousWords* words) {
  std::lock_guard lock(mutex_);
  watched_.erase(std::remove(watched_.begin(), watched_.end(), words), watched_.end());
}

std::optional<std::string> InProcessGroup::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

void InProcessGroup::abort(const std::string& error) {
  std::lock_guard lock(mutex_);
  if (!failure_) failure_ = error;
  failed_ = true;
  for (RendezvousWords* words : watched_) __atomic_store_n(&words->aborted, 1u, __ATOMIC_RELEASE);
  wake_.notify_all();
}

const std::vector<const void*>& InProcessGroup::exchange(int rank, const void* pointer,
                                                        const std::string& what) {
  std::unique_lock lock(mutex_);
  auto stopped = [&] {
    return ReplicaAborted("replica " + std::to_string(rank) + " stopped in " + what +
                          " because the group failed: " + *failure_);
  };
  if (failure_) throw stopped();
  pointers_[rank] = pointer;
  arrived_[rank] = true;
  lastArrival_ = std::chrono::steady_clock::now();
  if (++waiting_ == size_) {
    published_ = pointers_;
    waiting_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    generation_.fetch_add(1, std::memory_order_release);
    wake_.notify_all();
    return published_;
  }
  const uint64_t generation = generation_.load(std::memory_order_relaxed);
  // published_ stays as it is until every rank, this one too, arrives at the next exchange.
  lock.unlock();
  {
    // While it waits this replica's turn on the cores (CoreTurns.h) is free for another; it is
    // taken back with the group's mutex not held, which the replicas still running need.
    CoreTurns::Aside aside;
    if (pollBriefly([&] {
          return generation_.load(std::memory_order_acquire) != generation || failed_.load(std::memory_order_relaxed);
        }) &&
        generation_.load(std::memory_order_acquire) != generation)
      return published_;
    std::unique_lock waiting(mutex_);
    auto met = [&] { return generation_ != generation || failure_; };
    // Until the exchange is met or fails, or timeout_ passes with no rank arriving.
    while (!wake_.wait_until(waiting, lastArrival_ + timeout_, met) &&
           std::chrono::steady_clock::now() < lastArrival_ + timeout_) {
    }
  }
  lock.lock();
  if (generation_ != generation) return published_;
  if (failure_) throw stopped();
  std::string missing;
  for (int r = 0; r < size_; ++r)
    if (!arrived_[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  failure_ = what + " timed out after " + std::to_string(timeout_.count() / 1000.0).substr(0, 6) +
             " s on replica " + std::to_string(rank) + ": replica(s) " + missing +
             " never reached it (stuck, or running a different sequence of collectives); raise "
             "the limit with SPMD_COLLECTIVE_TIMEOUT=<seconds> if a step is legitimately that slow";
  failed_ = true;
  wake_.notify_all();
  throw Error(*failure_);
}

void InProcessGroup::barrier(int rank, const std::string& what) { exchange(rank, nullptr, what); }

// A step's gradients (one or a few bucketed lists of segments) cross the replicas in one
// exchange (reduceSegments).
Communicator::Pending InProcessCommunicator::allReduce(std::span<const Segment> in, std::span<const Segment> out,
                                                       DType dtype, Reduction op, const std::string& what, bool) {
  const size_t e = dtypeSize(dtype);
  if (size() == 1 && group_->leavesPerRank() == 1) {
    // One replica standing for one leaf: the fold of a single value is that value (a mean
    // divides by 1), so the result is the operands as they are, without staging or a fold pass.
    for (size_t k = 0; k < in.size(); ++k)
      if (out[k].data != in[k].data) copyBytes(out[k].data, in[k].data, size_t(in[k].count) * e);
    return {};
  }
  if (size() == 1) {
    // One replica standing for several leaves (accumulation's update on one device): its operands
    // are its subtree's roots, so the tree's root is each operand as it is (a mean divided once),
    // folded from operand to result directly: no staging, no exchange, the threads sharing the
    // elements (each element's order is the plan's, whoever folds it).
    const FoldPlan& plan = *group_->plan_;
    const int divisor = group_->leavesPerRank();
    for (size_t k = 0; k < in.size(); ++k) {
      const int64_t count = in[k].count, blocks = (count + kFoldBlock - 1) / kFoldBlock;
#pragma omp parallel for schedule(static) if (blocks > 1)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kFoldBlock, end = std::min(count, begin + kFoldBlock);
        const void* source[] = {in[k].data};
        void* result[] = {static_cast<std::byte*>(out[k].data) + begin * int64_t(e)};
        plan.run(dtype, source, begin, end, op, divisor, result);
      }
    }
    return {};
  }
  reduceSegments(in, out, dtype, op, {}, what);
  return {};
}

namespace {

// Whether any of `out` overlaps a segment of `in` other than its own (then the segments cannot
// be folded from operand to result directly: a rank's writes could land on what another still
// reads).
bool crossAliased(std::span<const Communicator::Segment> in, std::span<const Communicator::Segment> out, size_t e) {
  for (size_t k = 0; k < out.size(); ++k) {
    const auto* o = static_cast<const std::byte*>(out[k].data);
    for (size_t j = 0; j < in.size(); ++j) {
      const auto* i = static_cast<const std::byte*>(in[j].data);
      if (j != k && o < i + size_t(in[j].count) * e && i < o + size_t(out[k].count) * e) return true;
    }
  }
  return false;
}

}  // namespace

// Every rank publishes its segments; within its group (`members` in order; empty: every rank,
// over the ranks' subtrees of the fold tree) the member at position p of G folds the p-th of G
// slices of the segments' concatenation from the members' operands straight into its own result
// and copies that to the other members' results, so no rank packs or unpacks a flat buffer (45 MB
// of gradients in 62 segments, 2 / 4 replicas: 5.3 / 10.6 ms a call where packing took 18.3 /
// 37.6, 2026-12-06, AMD Zen 2). Each element's fold is the tree's, whichever rank folds it and
// however the segments cut the elements. A result may be its own operand (in place): the slices
// are disjoint, and a slice's operands are all read before its results are written.
void InProcessCommunicator::reduceSegments(std::span<const Segment> in, std::span<const Segment> out, DType dtype,
                                           Reduction op, std::span<const int64_t> members, const std::string& what) {
  const size_t e = dtypeSize(dtype);
  if (crossAliased(in, out, e)) {  // pack into one flat buffer, reduce it, unpack
    int64_t total = 0;
    for (const Segment& s : in) total += s.count;
    if (staging_.size() < size_t(total) * e) staging_.resize(size_t(total) * e);
    size_t offset = 0;
    for (const Segment& s : in) copyBytes(staging_.data() + offset, s.data, s.count * e), offset += s.count * e;
    const Segment flat{staging_.data(), total};
    reduceSegments({&flat, 1}, {&flat, 1}, dtype, op, members, what);
    offset = 0;
    for (const Segment& s : out) copyBytes(s.data, staging_.data() + offset, s.count * e), offset += s.count * e;
    return;
  }
  const int n = size();
  if (traceTrack_ < 0) traceTrack_ = timeline::on() ? timeline::track("collectives of replica " + std::to_string(rank_)) : 0;
  struct Operands {
    std::span<const Segment> in, out;
  };
  const Operands mine{in, out};
  const auto arrived = timeline::Clock::now();
  const std::vector<const void*>& published = group_->exchange(rank_, &mine, what);
  const auto gathered = timeline::Clock::now();
  std::vector<const Operands*> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) ranks[size_t(r)] = static_cast<const Operands*>(published[size_t(r)]);
  // Every rank runs the same program on buffers planned alike, so all pack or none does; said
  // (by every rank, which all see the same) rather than read out of bounds where that fails.
  for (int r = 0; r < n; ++r)
    if (ranks[size_t(r)]->in.size() != in.size())
      throw Error(what + ": replica " + std::to_string(r) + " reduces " + std::to_string(ranks[size_t(r)]->in.size()) +
                  " segments where replica " + std::to_string(rank_) + " reduces " + std::to_string(in.size()) +
                  "; this is a bug in spmd's runtime");
  std::vector<const Operands*> group;  // the members' operands, in the group's order
  int position = rank_;
  if (members.empty()) {
    group = std::move(ranks);
  } else {
    for (int64_t r : members) group.push_back(ranks[size_t(r)]);
    position = int(std::find(members.begin(), members.end(), int64_t(rank_)) - members.begin());
  }
  const int g = int(group.size());
  std::optional<FoldPlan> within;  // a group's own tree of G leaves (groups run no accumulation)
  if (!members.empty()) within.emplace(FoldPlan::leaves(g));
  const FoldPlan& tree = within ? *within : *group_->plan_;
  const int divisor = members.empty() ? n * group_->leavesPerRank() : g;
  int64_t total = 0;
  for (const Segment& s : in) total += s.count;
  const int64_t begin = total * position / g, end = total * (position + 1) / g;
  std::vector<const void*> sources(static_cast<size_t>(g));
  int64_t first = 0;  // the concatenation's index of segment k's first element
  for (size_t k = 0; k < in.size() && first < end; first += in[k].count, ++k) {
    const int64_t from = std::max(begin, first) - first, to = std::min(end, first + in[k].count) - first;
    if (to <= from) continue;
    for (int m = 0; m < g; ++m) sources[size_t(m)] = group[size_t(m)]->in[k].data;
    auto* result = static_cast<std::byte*>(out[k].data) + size_t(from) * e;
    void* results[] = {result};
    tree.run(dtype, sources.data(), from, to, op, divisor, results);
    for (int m = 0; m < g; ++m)
      if (m != position)
        copyBytes(static_cast<std::byte*>(group[size_t(m)]->out[k].data) + size_t(from) * e, result,
                    size_t(to - from) * e);
  }
  group_->barrier(rank_, what);  // nobody reads its results or reuses its operands before every slice is written
  if (traceTrack_ > 0) {
    timeline::span(traceTrack_, "wait for the replicas", "wait", arrived, gathered, what);
    timeline::span(traceTrack_, "all_reduce: fold and copy", "collective", gathered, timeline::Clock::now(), what,
                   total * int64_t(e));
  }
}

// Within groups: reduceSegments over the group's members.
Communicator::Pending InProcessCommunicator::allReduceInGroup(std::span<const Segment> in, std::span<const Segment> out,
                                                              DType dtype, Reduction op,
                                                              std::span<const int64_t> members, const std::string& what) {
  reduceSegments(in, out, dtype, op, members, what);
  return {};
}

// Straight from the members' operands: a replica reads its own group's alone.
Communicator::Pending InProcessCommunicator::allGatherInGroup(const void* in, void* out, size_t bytes,
                                                              std::span<const int64_t> members, const std::string& what) {
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  for (size_t k = 0; k < members.size(); ++k)
    copyBytes(static_cast<std::byte*>(out) + k * bytes, sources[size_t(members[k])], bytes);
  group_->barrier(rank_, what);  // inputs stay alive until every replica has copied them
  return {};
}

// The source's operand alone, straight from its buffer.
Communicator::Pending InProcessCommunicator::permute(const void* in, void* out, size_t bytes,
                                                     std::span<const int64_t> pairs, const std::string& what) {
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  const int64_t source = ppermuteSource(pairs, rank_);
  if (source >= 0) copyBytes(out, sources[size_t(source)], bytes);
  else if (bytes > 0) std::memset(out, 0, bytes);  // no source: zeros (an empty buffer may have no address)
  group_->barrier(rank_, what);  // inputs stay alive until every replica has copied its source's
  return {};
}

// Each replica copies its block from every replica's input: the blocks alone move, no all-gather.
Communicator::Pending InProcessCommunicator::allToAll(const void* in, void* out, size_t blockBytes,
                                                      const std::string& what) {
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  for (size_t j = 0; j < sources.size(); ++j)
    copyBytes(static_cast<std::byte*>(out) + j * blockBytes,
                static_cast<const std::byte*>(sources[j]) + size_t(rank_) * blockBytes, blockBytes);
  group_->barrier(rank_, what);  // inputs stay alive until every replica has copied its blocks
  return {};
}

// Within groups: the block at this replica's position from each member's input.
Communicator::Pending InProcessCommunicator::allToAllInGroup(const void* in, void* out, size_t blockBytes,
                                                             std::span<const int64_t> members, const std::string& what) {
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  const size_t position = size_t(std::find(members.begin(), members.end(), int64_t(rank_)) - members.begin());
  for (size_t k = 0; k < members.size(); ++k)
    copyBytes(static_cast<std::byte*>(out) + k * blockBytes,
                static_cast<const std::byte*>(sources[size_t(members[k])]) + position * blockBytes, blockBytes);
  group_->barrier(rank_, what);  // inputs stay alive until every member has copied its blocks
  return {};
}

Communicator::Pending InProcessCommunicator::reduceScatterInGroup(const void* in, void* out, DType dtype, int64_t count,
                                                                  Reduction op, std::span<const int64_t> members,
                                                                  const std::string& what) {
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  const int g = int(members.size());
  const int64_t row = count / g;
  const int64_t position = std::find(members.begin(), members.end(), int64_t(rank_)) - members.begin();
  std::vector<const void*> rows;
  for (int64_t r : members) rows.push_back(sources[size_t(r)]);
  void* outs[] = {out};
  FoldPlan::leaves(g).run(dtype, rows.data(), position * row, (position + 1) * row, op, g, outs);
  group_->barrier(rank_, what);  // inputs stay alive until every replica has read its row
  return {};
}

// Every replica folds its own row straight from the others' inputs: the fold of each element is
// the all-reduce's (the same plan and leaves), with no staging and no copies to the others.
Communicator::Pending InProcessCommunicator::reduceScatter(const void* in, void* out, DType dtype, int64_t count,
                                                           Reduction op, const std::string& what, bool) {
  const int n = size();
  const int64_t row = count / n;
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  void* rows[] = {out};
  group_->plan_->run(dtype, sources.data(), rank_ * row, (rank_ + 1) * row, op, n * group_->leavesPerRank(),
                     rows);
  group_->barrier(rank_, what);  // inputs stay alive until every replica has read its row
  return {};
}

Communicator::Pending InProcessCommunicator::allGather(const void* in, void* out, size_t bytes,
                                                       const std::string& what, bool) {
  const std::vector<const void*>& sources = group_->exchange(rank_, in, what);
  for (int r = 0; r < size(); ++r)
    copyBytes(static_cast<std::byte*>(out) + r * bytes, sources[r], bytes);
  group_->barrier(rank_, what);  // inputs stay alive until every replica has copied them
  return {};
}

}  // namespace spmd::runtime
