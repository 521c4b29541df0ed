// SharedValues: values the in-process replicas of a group make once per call (runtime/device/SharedValues.h).
#include "runtime/device/SharedValues.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/base/Error.h"
#include "runtime/base/HostMemory.h"

namespace spmd::runtime {

struct SharedValues::Slot {
  std::mutex mutex;                 // guards the fields up to `parts` while a call's first replica sets them
  uint64_t call = 0;                // the call whose value `value` holds or is being made for (0: none yet)
  bool refused = false;             // past the budget: every replica makes its own
  std::vector<std::byte> source;    // the bytes it is made from (the first replica's)
  std::unique_ptr<float, decltype(&std::free)> value{nullptr, &std::free};
  size_t floats = 0;
  int64_t parts = 0;
  std::atomic<int64_t> next{0};     // the next part to take
  std::atomic<int64_t> done{0};     // parts made
  std::atomic<bool> failed{false};  // a part's maker threw: the others make their own
};

SharedValues::SharedValues(size_t steps, size_t budgetBytes) : budget_(budgetBytes) {
  slots_.reserve(steps);
  for (size_t s = 0; s < steps; ++s) slots_.push_back(std::make_unique<Slot>());
}

SharedValues::~SharedValues() = default;

const float* SharedValues::share(size_t step, std::span<const std::byte> source, size_t floats, int64_t parts,
                                 const std::function<void(int64_t, int64_t, float*)>& make) {
  if (step >= slots_.size() || parts < 1) return nullptr;
  Slot& slot = *slots_[step];
  bool first = false;
  {
    std::lock_guard lock(slot.mutex);
    if (slot.refused) return nullptr;
    if (slot.call != call_) {  // the first replica of this call: the previous call's readers are all done
      if (!slot.value || slot.floats != floats) {
        const size_t bytes = floats * sizeof(float);
        const size_t had = slot.value ? slot.floats * sizeof(float) : 0;
        if (used_.load() - had + bytes > budget_) {
          slot.refused = true;
          return nullptr;
        }
        slot.value.reset();
        used_ -= had;
        slot.value.reset(static_cast<float*>(allocateAligned(bytes, nullptr)));
        if (!slot.value) {  // no memory: each makes its own in its scratch, as before
          slot.refused = true;
          return nullptr;
        }
        used_ += bytes;
        slot.floats = floats;
      }
      slot.source.assign(source.begin(), source.end());
      slot.parts = parts;
      slot.next = 0;
      slot.done = 0;
      slot.failed = false;
      slot.call = call_;
      first = true;
    }
  }
  // Set under the lock by this call's first replica, and left alone until the next call.
  if (!first && (slot.floats != floats || slot.parts != parts || slot.source.size() != source.size() ||
                 std::memcmp(slot.source.data(), source.data(), source.size()) != 0))
    return nullptr;
  float* value = slot.value.get();
  int64_t made = 0;
  for (int64_t part; (part = slot.next.fetch_add(1)) < parts; ++made) {
    try {
      make(part, part + 1, value);
    } catch (...) {
      slot.failed = true;
      throw;
    }
    slot.done.fetch_add(1, std::memory_order_release);
  }
  for (int spins = 0; slot.done.load(std::memory_order_acquire) < parts; ++spins) {
    if (slot.failed.load()) return nullptr;
    if (spins < 64) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
  if (made < parts) ++reads_;
  return value;
}

}  // namespace spmd::runtime
