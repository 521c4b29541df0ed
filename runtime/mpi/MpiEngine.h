// The one thread of a process that calls MPI (Horovod's background thread): replica threads
// and host code hand it work, which it runs in submission order on the job's communicator. A
// watchdog thread ends the job when one piece of work runs past its timeout, after asking the
// other processes which collective they reached, so the message names the processes that never
// arrived. Built only with MPI (SPMD_WITH_MPI); Processes.cpp starts it under mpirun.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/mpi/Processes.h"

namespace spmd::runtime {

class MpiEngine {
 public:
  // MPI must be initialised; `info` describes this process.
  explicit MpiEngine(const ProcessInfo& info);
  ~MpiEngine();
  MpiEngine(const MpiEngine&) = delete;
  MpiEngine& operator=(const MpiEngine&) = delete;

  // The engine of this job; only valid after processes() found more than one process.
  static MpiEngine& instance();

  // Queues `work` (it calls MPI on comm()); runs after everything submitted before it. `what`
  // names it in messages ("all_reduce at model.cpp:12 (f32 x 1024, sum)"). Work that throws, or
  // runs longer than `timeout`, ends the job (abortJob) naming this process and `what`.
  void submit(std::function<void()> work, std::string what, std::chrono::milliseconds timeout);
  // submit(), then waits until the work has run.
  void run(std::function<void()> work, std::string what, std::chrono::milliseconds timeout);
  MPI_Comm comm() const { return comm_; }
  const ProcessInfo& info() const { return info_; }
  // The replicas each process runs (the same K everywhere, checked when a group starts), so a
  // timeout can name the replicas of a process that never arrived; 0 while unknown.
  void setReplicasPerProcess(int k) { replicasPerProcess_ = k; }

 private:
  struct Work {
    std::function<void()> fn;
    std::string what;
    std::chrono::milliseconds timeout;
  };
  void serve();
  void watch();
  // Exchanges "which collective are you at" with every process over watchComm_ (point to
  // point, so it works while the engine thread is blocked in a collective), then abortJob.
  [[noreturn]] void timedOut(const std::string& what, uint64_t seq, std::chrono::milliseconds timeout);
  // SPMD_CHECK_COLLECTIVES: every process must be at the same collective; fails fast if not.
  void checkSame(const std::string& what, uint64_t seq);

  ProcessInfo info_;
  MPI_Comm comm_ = MPI_COMM_NULL, watchComm_ = MPI_COMM_NULL;
  bool check_ = false;
  std::atomic<int> replicasPerProcess_{0};
  std::mutex mutex_;
  std::condition_variable wake_, watchWake_;
  std::deque<Work> queue_;
  bool stop_ = false;
  // The work running now, for the watchdog.
  bool busy_ = false;
  uint64_t seq_ = 0;  // pieces of work started, the same count on every process
  std::string current_;
  std::chrono::steady_clock::time_point started_;
  std::chrono::milliseconds currentTimeout_{0};
  std::thread thread_, watchdog_;
};

// Initialises MPI (MPI_THREAD_MULTIPLE), fills `info` and starts the engine; MPI finalizes when
// the process exits normally. Called once, by processes().
void startMpiJob(ProcessInfo& info);
// MPI's error code as text.
std::string mpiErrorText(int code);
// Throws spmd::Error "<what>: <MPI call> failed: <text>" when `code` is not MPI_SUCCESS.
void checkMpi(int code, const char* call, const std::string& what);

}  // namespace spmd::runtime
