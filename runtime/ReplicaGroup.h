// One replica of a Program per device, run together: the CPU backend's emulated devices are
// worker threads (one per replica, each with its own Executor and an equal share of the OpenMP
// threads), joined by an in-process communicator. A replica that fails stops every replica
// with its error, naming the replica; a collective that waits too long fails the same way.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/DeviceList.h"
#include "runtime/Executor.h"
#include "runtime/InProcessCommunicator.h"

namespace spmd::runtime {

// OpenMP threads each of `replicas` emulated CPU devices gets (the cores are shared equally).
int cpuThreadsPerReplica(int replicas);

class ReplicaGroup {
 public:
  ReplicaGroup(const Program& program, const DeviceList& devices,
               std::chrono::milliseconds collectiveTimeout);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  // Executor::enableDebugNonFinite on every replica.
  void enableDebugNonFinite(bool nans, bool infs) {
    for (auto& e : executors_) e->enableDebugNonFinite(nans, infs);
  }
  int size() const { return static_cast<int>(executors_.size()); }
  // Replica r runs on inputs[r] and writes outputs[r] (see Executor::run: outputs without
  // storage are not copied out). Throws spmd::Error with the failing replica's error.
  // Safe to call from several threads: calls queue and run one after another (each replica
  // owns one arena and one communicator, which a call uses from start to end).
  void run(const std::vector<std::vector<Array>>& inputs, std::vector<std::vector<Array>>& outputs);

 private:
  void work(int rank);

  DeviceList devices_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::shared_ptr<InProcessGroup> group_;
  std::vector<std::unique_ptr<InProcessCommunicator>> comms_;
  int threadsPerReplica_ = 1;

  std::mutex runMutex_;  // one run at a time (see run)
  // Dispatch to the worker threads (only when there is more than one replica).
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  std::function<void(int)> job_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace spmd::runtime
