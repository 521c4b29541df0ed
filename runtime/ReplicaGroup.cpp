// ReplicaGroup: executors, communicators and worker threads; error collection per replica.
#include "runtime/ReplicaGroup.h"

#include <omp.h>

#include <atomic>

#include "runtime/cpu/CpuDevice.h"

namespace spmd::runtime {

int cpuThreadsPerReplica(int replicas) { return std::max(1, omp_get_max_threads() / std::max(1, replicas)); }

ReplicaGroup::ReplicaGroup(const Program& program, const DeviceList& devices,
                           std::chrono::milliseconds collectiveTimeout)
    : devices_(devices), group_(std::make_shared<InProcessGroup>(devices.size(), collectiveTimeout)) {
  if (devices.backend != "cpu")
    throw Error("device list '" + devices.spec + "': only the cpu backend is built");
  Executor::checkFitsHost(program, devices.size(), devices.spec);
  for (int r = 0; r < devices.size(); ++r) {
    executors_.push_back(
        std::make_unique<Executor>(program, makeDevice(devices, r)));
    comms_.push_back(std::make_unique<InProcessCommunicator>(group_, r));
    executors_.back()->setCommunicator(comms_.back().get());
  }
  if (size() == 1) return;  // one replica runs on the calling thread
  threadsPerReplica_ = cpuThreadsPerReplica(size());
  for (int r = 0; r < size(); ++r) workers_.emplace_back([this, r] { work(r); });
}

ReplicaGroup::~ReplicaGroup() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ReplicaGroup::work(int rank) {
  // The replicas share the cores: each gets its part of the OpenMP threads oneDNN uses.
  omp_set_num_threads(threadsPerReplica_);
  uint64_t seen = 0;
  for (;;) {
    std::function<void(int)> job;
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    job(rank);
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) finished_.notify_all();
  }
}

void ReplicaGroup::run(const std::vector<std::vector<Array>>& inputs,
                       std::vector<std::vector<Array>>& outputs) {
  if (static_cast<int>(inputs.size()) != size() || static_cast<int>(outputs.size()) != size())
    throw Error("replica group on " + devices_.spec + " runs " + std::to_string(size()) +
                " replicas, got inputs for " + std::to_string(inputs.size()));
  std::lock_guard runLock(runMutex_);
  group_->reset();
  std::vector<std::string> errors(size());
  std::atomic<int> firstFailed{-1};
  auto replica = [&](int r) {
    try {
      executors_[r]->run(inputs[r], outputs[r]);
    } catch (const ReplicaAborted&) {
      // stopped because of another replica; that one is reported
    } catch (const std::exception& e) {
      errors[r] = e.what();
      int none = -1;
      firstFailed.compare_exchange_strong(none, r);
      comms_[r]->abort("replica " + std::to_string(r) + " failed: " + errors[r]);
    }
  };
  if (size() == 1) {
    replica(0);
  } else {
    std::unique_lock lock(mutex_);
    job_ = replica;
    pending_ = size();
    ++generation_;
    start_.notify_all();
    finished_.wait(lock, [&] { return pending_ == 0; });
  }
  int r = firstFailed.load();
  if (r >= 0)
    throw Error("replica " + std::to_string(r) + " of " + std::to_string(size()) + " (" +
                executors_[r]->device().name() + ") failed, so all replicas stopped: " + errors[r]);
}

}  // namespace spmd::runtime
