// ReplicaGroup: executors, communicators and worker threads; error collection per replica.
#include "runtime/exec/ReplicaGroup.h"

#include <atomic>

#include "runtime/device/CoreTurns.h"
#include "runtime/device/Driver.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/device/SharedValues.h"

namespace spmd::runtime {

ReplicaGroup::ReplicaGroup(const Program& program, const DeviceList& devices, const Job& processes,
                           std::chrono::milliseconds collectiveTimeout, int threadsPerReplica, int leavesPerReplica,
                           int microBatches, int microAtOnce)
    : devices_(devices), job_(processes) {
  const ProcessInfo& job = processes.info();
  acrossProcesses_ = job.size > 1;
  exchanges_ = program.exchanges();
  if (acrossProcesses_ && program.axisName.empty())
    throw Error("program @" + program.name + " has no mapped axis, so it runs in one process; give its "
                "ReplicaGroup Job::single(), not the job of " + std::to_string(job.size) + " processes");
  if (acrossProcesses_) checkSameLayoutEverywhere(devices);
  const int replicas = devices.size() * job.size * leavesPerReplica;
  if (!program.axisName.empty() && program.replicas != replicas)
    throw Error("program @" + program.name + " was compiled for " + std::to_string(program.replicas) +
                " replicas (axis '" + program.axisName + "') but device list '" + devices.spec + "' has " +
                (job.size > 1 ? std::to_string(devices.size()) + " in each of " + std::to_string(job.size) +
                                    " processes, " + std::to_string(replicas) + " in all"
                              : std::to_string(devices.size())) +
                "; its collectives and pmean divisors assume " + std::to_string(program.replicas) + ", so run it on " +
                std::to_string(program.replicas) + " devices or compile it again for " + std::to_string(replicas));
  const Driver& driver = devices.driver();
  if (microBatches < 1) microBatches = leavesPerReplica;
  threads_ = driver.threadsPerReplica(devices, threadsPerReplica, job, microBatches, microAtOnce);
  Executor::checkFitsHost(program, devices.size(), devices.spec);
  comms_ = driver.makeCommunicators(devices, collectiveTimeout, processes, leavesPerReplica);
  if (devices.size() > 1) shared_ = std::make_unique<SharedValues>(program.steps.size(), SharedValues::kBudgetBytes);
  for (int r = 0; r < devices.size(); ++r) {
    deviceObjects_.push_back(driver.makeDevice(devices, r));
    if (job.size > 1 && !deviceObjects_.back()->hostAccessible() && !comms_[r]->deviceCollectives())
      throw Error("device list '" + devices.spec + "': across processes, collectives run through MPI on host "
                  "memory, which " + devices.backend + " devices do not have, and this backend has no device "
                  "library for them (cuda uses NCCL when the build found it); run the job on cpu:K devices");
    executors_.push_back(std::make_unique<Executor>(program, deviceObjects_.back()));
    executors_.back()->setCommunicator(comms_[r].get());
    executors_.back()->setSharedValues(shared_.get());
  }
  // One replica runs on the calling thread (with the caller's OpenMP threads, which the default
  // share of one replica is), unless the job has several processes, the threads per replica were
  // set, or it runs micro-batches (the replica then gets its thread count like any other).
  if (size() == 1 && !acrossProcesses_ && !threads_.chosen && microBatches == 1) return;
  if (threads_.turns > 0 && !acrossProcesses_) turns_ = std::make_unique<CoreTurns>(threads_.turns);
  for (int r = 0; r < size(); ++r) workers_.emplace_back([this, r] { work(r); });
}

// Every process must run the same number of replicas on the same backend: the pmap axis and
// every collective assume it. All processes see the same gathered counts, so all fail alike.
void ReplicaGroup::checkSameLayoutEverywhere(const DeviceList& devices) const {
  std::vector<int64_t> counts = job_.allGather(devices.size(), "device counts of " + devices.spec);
  std::string differ;
  for (size_t p = 0; p < counts.size(); ++p)
    if (counts[p] != counts[0]) differ += ", process " + std::to_string(p) + " has " + std::to_string(counts[p]);
  if (!differ.empty())
    throw Error("the processes of this job name different numbers of devices: process 0 has " +
                std::to_string(counts[0]) + differ + " (this is " + job_.info().describe() + ", device list '" +
                devices.spec + "'); every process must name the same count, e.g. --devices cpu:" +
                std::to_string(counts[0]));
}

ReplicaGroup::~ReplicaGroup() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

std::string ReplicaGroup::describeReplica(int r) const {
  const ProcessInfo& job = job_.info();
  if (!acrossProcesses_)
    return "replica " + std::to_string(r) + " of " + std::to_string(size()) + " (" + executors_[r]->device().name() + ")";
  return "replica " + std::to_string(job.rank * size() + r) + " of " + std::to_string(job.size * size()) +
         " (local replica " + std::to_string(r) + ", " + executors_[r]->device().name() + ")";
}

void ReplicaGroup::work(int rank) {
  devices_.driver().prepareReplicaThread(devices_, rank, threads_.threads);
  uint64_t seen = 0;
  for (;;) {
    std::function<void(int)> job;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = task_;
    }
    job(rank);
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) finished_.notify_all();
  }
}

void ReplicaGroup::dispatch(const std::function<void(int)>& task) {
  if (workers_.empty()) return task(0);
  std::unique_lock lock(mutex_);
  task_ = task;
  pending_ = size();
  ++generation_;
  start_.notify_all();
  finished_.wait(lock, [&] { return pending_ == 0; });
}

void ReplicaGroup::run(const std::vector<std::vector<Array>>& inputs,
                       std::vector<std::vector<Array>>& outputs) {
  std::vector<std::vector<Input>> in(inputs.size());
  std::vector<std::vector<Output>> out(outputs.size());
  for (size_t r = 0; r < inputs.size(); ++r)
    for (const Array& a : inputs[r]) in[r].push_back({a, nullptr});
  for (size_t r = 0; r < outputs.size(); ++r)
    for (const Array& a : outputs[r]) out[r].push_back(Output{.host = a});
  run(in, out);
}

void ReplicaGroup::run(const std::vector<std::vector<Input>>& inputs,
                       std::vector<std::vector<Output>>& outputs) {
  if (static_cast<int>(inputs.size()) != size() || static_cast<int>(outputs.size()) != size())
    throw Error("replica group on " + devices_.spec + " runs " + std::to_string(size()) +
                " replicas, got inputs for " + std::to_string(inputs.size()));
  std::lock_guard runLock(runMutex_);
  // Across processes, collectives must reach MPI in the same order everywhere: one compiled
  // step with collectives (or choosing its kernels, which process 0 sends) runs at a time in
  // each process (and every process must call them in the same order). One without runs beside
  // them (accumulation's micro-batches at once).
  static std::mutex jobOrder;
  std::unique_lock<std::mutex> orderLock;
  if (acrossProcesses_ && (exchanges_ || !kernelsChosen_)) orderLock = std::unique_lock(jobOrder);
  for (auto& comm : comms_) comm->reset();
  if (acrossProcesses_ && !kernelsChosen_) {
    // Kernels with variants are chosen before the first step, on replica 0's thread while no
    // collective runs, each process taking process 0's choices (runtime/device/Variants.h).
    kernelsChosen_ = true;
    std::string error;
    std::unique_ptr<ChoiceExchange> exchange = exchangeOf(job_);
    dispatch([&](int r) {
      if (r != 0) return;
      try {
        executors_[0]->chooseKernels(exchange.get());
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
    if (!error.empty()) throw Error(describeReplica(0) + " failed while choosing its kernels: " + error);
  }
  if (shared_) shared_->beginCall();
  std::vector<std::string> errors(size());
  std::atomic<int> firstFailed{-1};
  auto replica = [&](int r) {
    try {
      CoreTurns::Turn turn(turns_.get());
      executors_[r]->run(inputs[r], outputs[r]);
    } catch (const ReplicaAborted&) {
      // stopped because of another replica; that one is reported
    } catch (const std::exception& e) {
      errors[r] = e.what();
      int none = -1;
      firstFailed.compare_exchange_strong(none, r);
      comms_[r]->abort(describeReplica(r) + " failed: " + errors[r]);
    }
  };
  dispatch(replica);
  int r = firstFailed.load();
  if (r >= 0) throw Error(describeReplica(r) + " failed, so all replicas stopped: " + errors[r]);
}

}  // namespace spmd::runtime
