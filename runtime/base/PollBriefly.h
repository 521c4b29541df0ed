// pollBriefly: wait for a condition that usually comes within microseconds (the replicas of a
// step meeting in a collective, the next collective of a burst) by polling it before sleeping on
// a condition variable, whose wake-up costs tens of microseconds each time.
#pragma once

#include <chrono>
#include <thread>

namespace spmd::runtime {

// Polls `done` for up to 50 us, yielding the core after the first 5 so that more threads than
// cores still progress; true once `done` holds, false when the time ran out (then sleep).
template <class Done>
bool pollBriefly(Done done) {
  constexpr auto kPoll = std::chrono::microseconds(50), kSpin = std::chrono::microseconds(5);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (done()) return true;
    if ((i & 15) != 15) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > kPoll) return false;
    if (waited > kSpin) std::this_thread::yield();
  }
}

}  // namespace spmd::runtime
