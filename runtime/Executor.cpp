// Executor: buffer allocation, input binding and checking, step dispatch, output copy-out.
#include "runtime/Executor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "runtime/MemoryPlan.h"

namespace spmd::runtime {

Executor::Executor(Program program, std::shared_ptr<Device> device)
    : program_(std::move(program)), device_(std::move(device)) {
  const KernelTable& table = device_->kernels();
  for (const Step& step : program_.steps) {
    auto it = table.find(step.op);
    if (it == table.end())
      throw Error("device " + device_->name() + " has no kernel for op '" + step.op + "' (" +
                  step.location + ")");
    kernels_.push_back(it->second);
  }
  caches_.resize(program_.steps.size());
  profile_ = std::getenv("SPMD_PROFILE") != nullptr;
  buffers_.resize(program_.buffers.size());
  checkMemoryPlan(program_);
  std::shared_ptr<std::byte> arena;
  if (program_.arenaBytes) arena = device_->allocate(program_.arenaBytes);
  std::vector<bool> isInput(program_.buffers.size());
  for (int id : program_.inputs) isInput[id] = true;
  for (size_t id = 0; id < program_.buffers.size(); ++id) {
    const BufferDesc& desc = program_.buffers[id];
    if (isInput[id] && device_->hostAccessible()) continue;
    if (desc.offset >= 0) {  // planned: a view into the arena that keeps the arena alive
      buffers_[id] = std::shared_ptr<std::byte>(arena, arena.get() + desc.offset);
      continue;
    }
    buffers_[id] = device_->allocate(desc.bytes());
    if (!desc.constant.empty())
      device_->copyToDevice(buffers_[id].get(), desc.constant.data(), desc.bytes());
  }
}

Executor::~Executor() {
  if (!profile_ || runs_ == 0) return;
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(opTime_.begin(), opTime_.end());
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  double total = 0;
  for (auto& row : rows) total += row.second.first;
  std::fprintf(stderr, "spmd profile of @%s on %s: %.2f ms per run over %lld runs\n",
               program_.name.c_str(), device_->name().c_str(), total * 1e3 / double(runs_),
               static_cast<long long>(runs_));
  for (auto& [op, t] : rows)
    std::fprintf(stderr, "  %-32s %9.2f ms/run %5.1f%%  %5lld calls/run\n", op.c_str(),
                 t.first * 1e3 / double(runs_), 100 * t.first / total,
                 static_cast<long long>(t.second / runs_));
}

std::vector<Array> Executor::run(std::span<const Array> inputs) {
  std::vector<Array> results;
  for (int id : program_.outputs)
    results.push_back(Array::zeros(program_.buffers[id].dtype, program_.buffers[id].shape));
  run(inputs, results);
  return results;
}

void Executor::run(std::span<const Array> inputs, std::span<Array> outputs) {
  if (outputs.size() != program_.outputs.size())
    throw Error("program @" + program_.name + " has " + std::to_string(program_.outputs.size()) +
                " outputs, got room for " + std::to_string(outputs.size()));
  if (inputs.size() != program_.inputs.size())
    throw Error("program @" + program_.name + " takes " + std::to_string(program_.inputs.size()) +
                " inputs, got " + std::to_string(inputs.size()));
  device_->activate();
  std::vector<std::byte*> data(buffers_.size());
  for (size_t id = 0; id < buffers_.size(); ++id) data[id] = buffers_[id].get();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BufferDesc& desc = program_.buffers[program_.inputs[i]];
    const Array& array = inputs[i];
    if (array.dtype != desc.dtype || array.shape != desc.shape || array.bytes() != desc.bytes())
      throw Error("input " + std::to_string(i) + " of @" + program_.name + " must be " +
                  std::string(dtypeName(desc.dtype)) + shapeString(desc.shape) + ", got " +
                  std::string(dtypeName(array.dtype)) + shapeString(array.shape));
    if (device_->hostAccessible())
      data[program_.inputs[i]] = array.data();
    else
      device_->copyToDevice(data[program_.inputs[i]], array.data(), desc.bytes());
  }

  auto view = [&](int id) {
    const BufferDesc& desc = program_.buffers[id];
    return TensorView{data[id], desc.dtype, desc.shape};
  };
  std::vector<TensorView> ins, outs;
  for (size_t s = 0; s < program_.steps.size(); ++s) {
    const Step& step = program_.steps[s];
    ins.clear();
    outs.clear();
    for (int id : step.inputs) ins.push_back(view(id));
    for (int id : step.outputs) outs.push_back(view(id));
    KernelCall call{step, ins, outs, caches_[s], comm_, device_.get()};
    try {
      if (!profile_) {
        kernels_[s](call);
      } else {
        auto start = std::chrono::steady_clock::now();
        kernels_[s](call);
        auto& slot = opTime_[step.op];
        slot.first += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        slot.second++;
      }
    } catch (const ReplicaAborted&) {
      throw;  // another replica's failure; the group reports that one
    } catch (const std::exception& e) {
      throw Error("step " + std::to_string(s) + " '" + step.op + "' (" + step.location +
                  ") failed on " + device_->name() + ": " + e.what());
    }
  }

  ++runs_;
  device_->synchronize();  // asynchronous devices: finish reading the caller's inputs, report errors
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].storage) continue;
    const BufferDesc& desc = program_.buffers[program_.outputs[i]];
    if (outputs[i].dtype != desc.dtype || outputs[i].shape != desc.shape)
      throw Error("output " + std::to_string(i) + " of @" + program_.name + " is " +
                  std::string(dtypeName(desc.dtype)) + shapeString(desc.shape) +
                  ", but the destination is " + std::string(dtypeName(outputs[i].dtype)) +
                  shapeString(outputs[i].shape));
    device_->copyToHost(outputs[i].data(), data[program_.outputs[i]], desc.bytes());
  }
}

}  // namespace spmd::runtime
