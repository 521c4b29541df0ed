// CoreTurns: at most N replicas of a process running at once (runtime/device/CoreTurns.h).
#include "runtime/device/CoreTurns.h"

#include <algorithm>

namespace spmd::runtime {
namespace {
// The turns whose turn the calling thread's step holds (null: none, or its step takes no turns).
thread_local CoreTurns* held = nullptr;
}  // namespace

CoreTurns::CoreTurns(int turns) : free_(std::max(1, turns)) {}

void CoreTurns::take() {
  std::unique_lock lock(mutex_);
  freed_.wait(lock, [&] { return free_ > 0; });
  --free_;
}

void CoreTurns::give() {
  {
    std::lock_guard lock(mutex_);
    ++free_;
  }
  freed_.notify_one();
}

CoreTurns::Turn::Turn(CoreTurns* turns) : turns_(turns) {
  if (!turns_) return;
  turns_->take();
  held = turns_;
}

CoreTurns::Turn::~Turn() {
  if (!turns_) return;
  held = nullptr;
  turns_->give();
}

CoreTurns::Aside::Aside() : turns_(held) {
  if (!turns_) return;
  held = nullptr;  // a nested wait gives nothing more
  turns_->give();
}

CoreTurns::Aside::~Aside() {
  if (!turns_) return;
  turns_->take();
  held = turns_;
}

}  // namespace spmd::runtime
