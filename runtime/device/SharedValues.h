// Values that the in-process replicas of one ReplicaGroup compute alike, each from its own copy of
// the same bytes: the Winograd filter transform of replicated weights, which every replica of a
// data-parallel step made again for itself (the width-16 cpu:4 step on 2 cores: 5.6% of its time).
// Per step and call, the replicas that need the value while it is being made each take parts of
// it, and those that come later read it whole. A replica whose bytes differ from the first one's
// (compared, not hashed) makes its own, as does every replica of a step past the group's byte
// budget. The value's bits are those each replica would have made: the same function of the same
// bytes, part by part.
//
// A replica waiting for parts another one took holds its core and turn (runtime/device/CoreTurns.h)
// briefly: the other is running the same kernel, and making a part waits for nothing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace spmd::runtime {

class SharedValues {
 public:
  // `steps`: the Program's; `budgetBytes`: the most all the group's values may take.
  SharedValues(size_t steps, size_t budgetBytes);
  ~SharedValues();
  SharedValues(const SharedValues&) = delete;
  SharedValues& operator=(const SharedValues&) = delete;

  // Before each call of the group, while no replica runs.
  void beginCall() { ++call_; }

  // Step `step`'s value for this call: `floats` floats made from `source` by `make(first, last,
  // out)`, which writes parts [first, last) of `parts` into `out`. Null when the caller must make
  // its own: its source differs from the first replica's, or the step's value is past the budget.
  const float* share(size_t step, std::span<const std::byte> source, size_t floats, int64_t parts,
                     const std::function<void(int64_t, int64_t, float*)>& make);

  // Bytes the values hold now (tests).
  size_t bytes() const { return used_.load(); }

  // Calls since the group started whose value a replica read instead of making it whole (tests).
  int64_t reads() const { return reads_.load(); }

  // The default budget: 64 MiB a group.
  static constexpr size_t kBudgetBytes = size_t{64} << 20;

 private:
  struct Slot;
  std::vector<std::unique_ptr<Slot>> slots_;
  const size_t budget_;
  std::atomic<size_t> used_{0};
  std::atomic<int64_t> reads_{0};
  uint64_t call_ = 0;
};

}  // namespace spmd::runtime
