// Replicas that take turns on the cores: when a process runs more replicas than its OpenMP
// threads hold at their share (cpu:4 on 2 cores, one thread each), at most `turns` of them run
// their kernels at once, instead of all of them time-sliced by the OS with each other's data in
// the caches. A replica holds a turn while it runs its step (CoreTurns::Turn) and gives it away
// while it waits for the others in a collective (CoreTurns::Aside), so the replicas still meet:
// a waiting replica holds no turn, and the last to arrive holds one.
//
// Only waits with no lock held that a running replica needs may step aside (a turn is taken back
// after the wait), so a replica never waits for a turn while blocking one that holds it.
#pragma once

#include <condition_variable>
#include <mutex>

namespace spmd::runtime {

class CoreTurns {
 public:
  explicit CoreTurns(int turns);

  // The calling thread's step: waits for a turn (none when `turns` is null), holds it to the end.
  class Turn {
   public:
    explicit Turn(CoreTurns* turns);
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;

   private:
    CoreTurns* turns_;
  };

  // A wait for the other replicas: the calling thread's turn (if its step holds one) is free
  // for the wait's length and taken back at its end.
  class Aside {
   public:
    Aside();
    ~Aside();
    Aside(const Aside&) = delete;
    Aside& operator=(const Aside&) = delete;

   private:
    CoreTurns* turns_;
  };

 private:
  void take();
  void give();

  std::mutex mutex_;
  std::condition_variable freed_;
  int free_;
};

}  // namespace spmd::runtime
