// ReplicaGroup: executors, communicators and worker threads; error collection per replica.
#include "runtime/exec/ReplicaGroup.h"

#include <atomic>

#include "runtime/device/Driver.h"

namespace spmd::runtime {

ReplicaGroup::ReplicaGroup(const Program& program, const DeviceList& devices,
                           std::chrono::milliseconds collectiveTimeout)
    : devices_(devices) {
  if (!program.axisName.empty() && program.replicas != devices.size())
    throw Error("program @" + program.name + " was compiled for " + std::to_string(program.replicas) +
                " replicas (axis '" + program.axisName + "') but device list '" + devices.spec + "' has " +
                std::to_string(devices.size()) + "; its collectives and pmean divisors assume " +
                std::to_string(program.replicas) + ", so run it on " + std::to_string(program.replicas) +
                " devices or compile it again for " + std::to_string(devices.size()));
  const Driver& driver = devices.driver();
  Executor::checkFitsHost(program, devices.size(), devices.spec);
  comms_ = driver.makeCommunicators(devices, collectiveTimeout);
  for (int r = 0; r < devices.size(); ++r) {
    deviceObjects_.push_back(driver.makeDevice(devices, r));
    executors_.push_back(std::make_unique<Executor>(program, deviceObjects_.back()));
    executors_.back()->setCommunicator(comms_[r].get());
  }
  if (size() == 1) return;  // one replica runs on the calling thread
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
  devices_.driver().prepareReplicaThread(devices_, rank);
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
  std::vector<std::vector<Input>> in(inputs.size());
  std::vector<std::vector<Output>> out(outputs.size());
  for (size_t r = 0; r < inputs.size(); ++r)
    for (const Array& a : inputs[r]) in[r].push_back({a, nullptr});
  for (size_t r = 0; r < outputs.size(); ++r)
    for (const Array& a : outputs[r]) out[r].push_back({a});
  run(in, out);
}

void ReplicaGroup::run(const std::vector<std::vector<Input>>& inputs,
                       std::vector<std::vector<Output>>& outputs) {
  if (static_cast<int>(inputs.size()) != size() || static_cast<int>(outputs.size()) != size())
    throw Error("replica group on " + devices_.spec + " runs " + std::to_string(size()) +
                " replicas, got inputs for " + std::to_string(inputs.size()));
  std::lock_guard runLock(runMutex_);
  for (auto& comm : comms_) comm->reset();
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
