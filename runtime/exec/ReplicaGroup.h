// One replica of a Program per device, run together: one worker thread per replica, each with
// its own Executor on the device the list's Driver makes (and prepares the thread for), joined
// by the driver's communicators. A replica that fails stops every replica with its error,
// naming the replica; a collective that waits too long fails the same way. In a job of several
// processes (the Job it is given, runtime/device/Job.h; runtime/mpi's processJob() under
// mpirun), the group runs this process's replicas, global replica index = process rank * size()
// + local index, and a failure ends the whole job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/exec/Executor.h"

namespace spmd::runtime {

class CoreTurns;
class SharedValues;

class ReplicaGroup {
 public:
  // `threadsPerReplica` > 0 asks for that many host threads per replica (Driver::threadsPerReplica).
  // `leavesPerReplica`: the virtual replicas each replica stands for in the program's
  // all-reduces (gradient accumulation's steps, already reduced; the program's replica count is
  // devices x processes x this). `job`: the processes the program's axis spans (Job::single()
  // for a program without an axis, or one run by this process alone); it must outlive the group.
  // `microBatches`: the micro-batches each replica runs in turn (default leavesPerReplica), which
  // count as replicas in the default thread share, so every layout of one virtual replica count
  // runs the same threads. `microAtOnce`: how many of them run together (Driver::threadsPerReplica:
  // with thread-invariant kernels they share the device's threads; 0: as many as fit).
  ReplicaGroup(const Program& program, const DeviceList& devices, const Job& job,
               std::chrono::milliseconds collectiveTimeout, int threadsPerReplica = 0, int leavesPerReplica = 1,
               int microBatches = 0, int microAtOnce = 0);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  // Executor::enableDebugNonFinite on every replica.
  void enableDebugNonFinite(bool nans, bool infs) {
    for (auto& e : executors_) e->enableDebugNonFinite(nans, infs);
  }
  int size() const { return static_cast<int>(executors_.size()); }
  // The values its in-process replicas make once per call (null with one replica; tests).
  const SharedValues* sharedValues() const { return shared_.get(); }
  const Executor& executor(int r) const { return *executors_.at(size_t(r)); }
  // Replica r runs on inputs[r] and writes outputs[r] (see Executor::run: outputs without
  // storage are not copied out). Throws spmd::Error with the failing replica's error.
  // Safe to call from several threads: calls queue and run one after another (each replica
  // owns one arena and one communicator, which a call uses from start to end).
  void run(const std::vector<std::vector<Array>>& inputs, std::vector<std::vector<Array>>& outputs);
  // The general form (Executor's Input/Output): inputs and outputs may stay on the devices.
  void run(const std::vector<std::vector<Input>>& inputs, std::vector<std::vector<Output>>& outputs);
  const Program& program() const { return executors_.front()->program(); }
  const DeviceList& devices() const { return devices_; }
  // The processes the program's axis spans (Job::single() for one).
  const Job& job() const { return job_; }
  // The host threads each replica's kernels run with (0: the backend's results do not depend on
  // them; Driver::threadsPerReplica).
  int threadsPerReplica() const { return threads_.threads; }
  const ThreadShare& threadShare() const { return threads_; }
  // axis_index returns replica * steps + step until the next call (accumulation's virtual replicas).
  void setVirtualStep(int step, int steps) {
    for (auto& c : comms_) c->setVirtualStep(step, steps);
  }
  // What the last run did, summed over the replicas (Executor::lastCall).
  CallCounts lastCall() const {
    CallCounts total;
    for (const auto& e : executors_) total += e->lastCall();
    return total;
  }
  // The device replica r runs on.
  const std::shared_ptr<Device>& device(int r) const { return deviceObjects_.at(r); }
  // Every replica's device, in replica order.
  const std::vector<std::shared_ptr<Device>>& deviceObjects() const { return deviceObjects_; }

 private:
  void work(int rank);
  void checkSameLayoutEverywhere(const DeviceList& devices) const;
  // "replica 3 of 4 (cpu:1)", with the global index in a job of several processes.
  std::string describeReplica(int r) const;

  DeviceList devices_;
  const Job& job_;
  bool acrossProcesses_ = false;  // the program's axis spans the replicas of several processes
  bool kernelsChosen_ = false;    // across processes: process 0's kernel choices taken (first run)
  bool exchanges_ = false;        // the program has steps that move data between replicas
  // Runs `task(r)` for every replica r on its worker (or the calling thread), waiting for all.
  void dispatch(const std::function<void(int)>& task);
  ThreadShare threads_;
  std::unique_ptr<CoreTurns> turns_;  // when threads_.turns > 0: the replicas take turns
  std::unique_ptr<SharedValues> shared_;  // with several replicas: values they make once per call
  std::vector<std::shared_ptr<Device>> deviceObjects_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::vector<std::unique_ptr<Communicator>> comms_;

  std::mutex runMutex_;  // one run at a time (see run)
  // Dispatch to the worker threads (only when there is more than one replica).
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_, finished_;
  std::function<void(int)> task_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace spmd::runtime
