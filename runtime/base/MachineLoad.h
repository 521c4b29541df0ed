// How busy other processes kept the machine's cores over a stretch of time, from Linux's
// /proc/stat (every core's busy and total ticks) and /proc/self/stat (this process's): what a
// measurement taken meanwhile (kernel timing, runtime/device/KernelChoice) competed with; and,
// for one timed run, whether its thread waited for a core (/proc/thread-self/schedstat).
#pragma once

#include <functional>

namespace spmd::runtime {

// Clock ticks so far: busy and all ticks summed over the cores, and this process's.
struct CpuTicks {
  double busy = 0, total = 0, self = 0;
  bool known = false;  // false where /proc could not be read
};

CpuTicks cpuTicksNow();
// The cores online (at least 1).
int onlineCores();
// Tests: where cpuTicksNow reads from (null: /proc).
void setCpuTicksSource(std::function<CpuTicks()> source);

// Between two readings: the cores other processes and this one kept busy on average; known only
// when both readings were and at least `leastTicks` ticks of wall time passed (a tick is 10 ms
// on most Linux systems, so shorter stretches say nothing).
struct MachineLoad {
  double others = 0, self = 0;
  int cores = 0;
  bool known = false;
  // Other processes kept at least half a core busy while the machine had no idle core left
  // (within a quarter of one): they took time from this process.
  bool contended() const { return known && others >= 0.5 && others + self > cores - 0.25; }
};

MachineLoad loadBetween(const CpuTicks& before, const CpuTicks& after, int cores, double leastTicks = 5);

// Seconds the calling thread has spent runnable but waiting for a core (preempted by other
// work), from /proc/thread-self/schedstat's run delay; NaN where it cannot be read (a kernel
// without scheduler statistics). Precise to the scheduler's clock, so it tells one timed run of
// a millisecond from another, where /proc/stat's 10 ms ticks cannot.
double runQueueSeconds();
// Tests: where runQueueSeconds reads from (null: /proc).
void setRunQueueSource(std::function<double()> source);
// Whether a timed run of `seconds` was slowed by other work: its thread waited `waited` seconds
// for a core meanwhile, over 2% of the run and 50 us (two quiet Zen 2 cores: at most 1% of a
// 2-thread 57 ms GEMM, where one busy loop beside it made the thread wait 25-55%).
bool waitedForCores(double waited, double seconds);

}  // namespace spmd::runtime
