// Executor: buffer allocation, input binding and checking, step dispatch, output copy-out.
#include "runtime/exec/Executor.h"

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "runtime/base/HostMemory.h"
#include "runtime/device/CustomKernels.h"
#include "runtime/base/Parse.h"
#include "runtime/base/Timeline.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/device/Variants.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/MemoryPlan.h"
#include "runtime/program/OpAttrs.h"
#include "runtime/program/ProgramCheck.h"
#include "runtime/program/StepCost.h"

namespace spmd::runtime {
namespace {

bool envFlag(const char* name) { return envSwitch(name).value_or(false); }

// Index of the first value `bad` accepts, and how many there are; -1 when none.
template <typename T, typename Bad>
std::pair<int64_t, int64_t> scan(const T* data, int64_t n, Bad bad) {
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < n; ++i)
    if (bad(data[i])) {
      if (first < 0) first = i;
      ++count;
    }
  return {first, count};
}

std::string indexString(int64_t linear, std::span<const int64_t> shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) index[d] = linear % shape[d], linear /= shape[d];
  return shapeString(index);
}

}  // namespace

bool debugNansFromEnvironment() { return envFlag("SPMD_DEBUG_NANS"); }
bool debugInfsFromEnvironment() { return envFlag("SPMD_DEBUG_INFS"); }

void Executor::checkFinite(const TensorView& view, const std::string& what) {
  if (view.dtype == DType::i32) return;
  size_t bytes = static_cast<size_t>(numElements(view.shape)) * dtypeSize(view.dtype);
  std::vector<std::byte> host;
  const std::byte* data = static_cast<const std::byte*>(view.data);
  if (!device_->hostAccessible()) {
    device_->synchronize();
    host.resize(bytes);
    device_->copyToHost(host.data(), data, bytes);
    data = host.data();
  }
  for (bool nan : {true, false}) {
    if (!(nan ? debugNans_ : debugInfs_)) continue;
    auto bad = [nan](auto v) { return nan ? std::isnan(v) : std::isinf(v); };
    const int64_t n = numElements(view.shape);
    auto [first, count] = view.dtype == DType::f32   ? scan(reinterpret_cast<const float*>(data), n, bad)
                          : view.dtype == DType::f64 ? scan(reinterpret_cast<const double*>(data), n, bad)
                                                     : scan(reinterpret_cast<const bf16*>(data), n,
                                                            [&](bf16 v) { return bad(fromBf16(v)); });
    if (first < 0) continue;
    throw Error(what + " (" + std::string(dtypeName(view.dtype)) + shapeString(view.shape) + ") holds " +
                (nan ? "NaN" : "an infinity") + " at " + indexString(first, view.shape) + " (" +
                std::to_string(count) + " of " + std::to_string(numElements(view.shape)) +
                " elements); stopped by " + (nan ? "SPMD_DEBUG_NANS" : "SPMD_DEBUG_INFS") +
                " at the first op that produced one");
  }
}

Executor::Executor(Program program, std::shared_ptr<Device> device)
    : program_(std::move(program)), device_(std::move(device)) {
  const KernelTable& table = device_->kernels();
  for (const Step& step : program_.steps) {
    auto it = table.find(step.op);
    if (it == table.end())
      throw Error("device " + device_->name() + " has no kernel for op '" + step.op + "' (" +
                  step.location + ")");
    kernels_.push_back(it->second.fn);
    // Kernels chosen among variants: their settings (SPMD_KERNEL_TIMING, SPMD_KERNELS) and the
    // kernel cache's choices file are read and checked now, before the first step.
    if (it->second.variants) kernelTiming(), threadInvariantKernels(), tightRoundingKernels(), KernelChoices::process();
  }
  deviceRendezvousWanted();  // SPMD_DEVICE_RENDEZVOUS checked before the first step, too
  cudaChannelsLast();        // and SPMD_CHANNELS_LAST, on every backend (cuda and sim compile by it)
  for (size_t id = 0; id < program_.buffers.size(); ++id)
    if (const std::string& layout = program_.buffers[id].layout; !device_->readsLayout(layout))
      throw Error("buffer %" + std::to_string(id) + " of @" + program_.name + " has the layout " + layout +
                  ", which device " + device_->name() + " does not read: compile the program for this device (" +
                  (layout == kChannelsLast ? "nhwc is the CUDA backend's, with SPMD_CHANNELS_LAST=1"
                                           : "the layout is the CPU backend's") + ")");
  caches_.resize(program_.steps.size());
  variants_.resize(program_.steps.size());
  checks_.resize(program_.steps.size());
  if (const char* profile = std::getenv("SPMD_PROFILE");
      profile && (std::string(profile) == "device" || std::string(profile) == "kernels"))
    profileDevice_ = true, profileKernels_ = std::string(profile) == "kernels",
    stepSeconds_.assign(program_.steps.size(), 0.0);
  else
    profile_ = envFlag("SPMD_PROFILE");
  if (timeline::on()) traceTrack_ = timeline::track("replica " + device_->name());
  debugNans_ = debugNansFromEnvironment();
  debugInfs_ = debugInfsFromEnvironment();
  buffers_.resize(program_.buffers.size());
  checkProgram(program_);  // any Program, from the compiler, a file or a hand: fields agree
  for (Step& step : program_.steps) {
    decodeAttributes(step);  // once, for every call of the step
    if (step.op == "custom_call") checkCustomCall(step);  // its target registered in this process
  }
  std::shared_ptr<std::byte> arena;
  if (program_.arenaBytes) arena = device_->allocate(program_.arenaBytes);
  std::vector<bool> isInput(program_.buffers.size());
  for (int id : program_.inputs) isInput[id] = true;
  inPlace_ = inPlaceOutputs(program_);
  unplannedInPlace_ = unplannedInPlace(program_);
  for (size_t id = 0; id < program_.buffers.size(); ++id) {
    const BufferDesc& desc = program_.buffers[id];
    if ((isInput[id] && device_->hostAccessible()) || unplannedInPlace_[id]) continue;
    if (desc.offset >= 0) {  // planned: a view into the arena that keeps the arena alive
      buffers_[id] = std::shared_ptr<std::byte>(arena, arena.get() + desc.offset);
      continue;
    }
    buffers_[id] = device_->allocate(desc.bytes());
    if (!desc.constant.empty())
      device_->copyToDevice(buffers_[id].get(), desc.constant.data(), desc.bytes());
  }
}

void Executor::chooseKernels(ChoiceExchange* exchange) {
  const KernelTable& table = device_->kernels();
  for (const Step& step : program_.steps) {
    const Kernel& kernel = table.at(step.op);
    if (!kernel.choose) continue;
    // Host scratch: the kernels with variants are host kernels (cpu, and sim's queued cpu ones).
    std::vector<std::unique_ptr<float[]>> scratch;
    auto views = [&](const std::vector<int>& ids, bool fill) {
      std::vector<TensorView> out;
      for (int id : ids) {
        const BufferDesc& desc = program_.buffers[id];
        const size_t floats = (desc.bytes() + sizeof(float) - 1) / sizeof(float);
        scratch.push_back(std::make_unique<float[]>(floats));
        float* data = scratch.back().get();
        // Small values of both signs (f32), else a fixed byte pattern: a variant's speed does not
        // depend on them, and none is a NaN or a denormal.
        for (size_t i = 0; i < floats; ++i)
          data[i] = desc.dtype == DType::f32 && fill ? float(int(i * 2654435761u % 2001) - 1000) * 1e-3f : 0.f;
        out.push_back(TensorView{data, desc.dtype, desc.shape, desc.layout});
      }
      return out;
    };
    std::vector<TensorView> ins = views(step.inputs, true), outs = views(step.outputs, false);
    std::shared_ptr<void> cache;
    KernelCall call{step, ins, outs, cache, comm_, device_.get()};
    kernel.choose(call, exchange);
  }
}

GraphCapture* Executor::graphsFor(bool debug) {
  GraphCapture* graphs = device_->graphs();
  if (!graphs || !graphsWanted_ || runs_ == 0 || !graphsOff_.empty()) return nullptr;  // the first call fills the caches
  if (debug) return turnGraphsOff("the debug mode checks every step's outputs on the host"), nullptr;
  if (profile_ || profileDevice_ || events_ || traceTrack_) return nullptr;  // per-step timings and events need the steps one by one
  if (comm_ && !comm_->pointers() && !comm_->deviceCollectives())
    return turnGraphsOff("its collectives cross processes and finish on the host"), nullptr;
  return graphs;
}

void Executor::turnGraphsOff(const std::string& why) {
  graphsOff_ = why;
  if (envSwitch("SPMD_LOG_COMPILES").value_or(false))
    std::fprintf(stderr, "spmd: graphs off for @%s on %s: %s\n", program_.name.c_str(), device_->name().c_str(),
                 why.c_str());
}

// Each kernel mark's time since the mark before it, by the op of the step it falls in; a step's
// time after its last kernel mark (work no mark covers) counts as "(between kernels)".
void Executor::addKernelTimes(const std::vector<std::string>& labels, const std::vector<double>& t) {
  int64_t step = -1;  // the step whose start was the last boundary
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty()) {
      if (step >= 0 && i > 0 && !labels[i - 1].empty() && t[i] > t[i - 1]) {
        auto& slot = kernelSeconds_[{program_.steps[size_t(step)].op, "(between kernels)"}];
        slot.first += t[i] - t[i - 1];
      }
      ++step;
      continue;
    }
    if (step < 0 || step >= int64_t(program_.steps.size()) || i == 0) continue;  // outside the steps
    auto& slot = kernelSeconds_[{program_.steps[size_t(step)].op, labels[i]}];
    slot.first += t[i] - t[i - 1];
    ++slot.second;
  }
}

void Executor::printDeviceProfile() const {
  const double runs = double(profiledRuns_);
  double total = 0;
  for (double t : stepSeconds_) total += t;
  std::fprintf(stderr, "spmd device profile of @%s on %s (%s clock): %.3f ms per run over %lld runs\n",
               program_.name.c_str(), device_->name().c_str(), deviceClock_ ? "the device's" : "the host's",
               total * 1e3 / runs, static_cast<long long>(profiledRuns_));
  if (total <= 0) return;
  std::map<std::string, std::pair<double, int>> byOp;
  for (size_t s = 0; s < stepSeconds_.size(); ++s) {
    auto& slot = byOp[program_.steps[s].op];
    slot.first += stepSeconds_[s], slot.second++;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(byOp.begin(), byOp.end());
  std::sort(ops.begin(), ops.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  std::fprintf(stderr, "  by op:%27s %9s %6s %6s\n", "", "ms/run", "%", "steps");
  for (const auto& [op, t] : ops)
    std::fprintf(stderr, "    %-30s %9.3f %6.1f %6d\n", op.c_str(), t.first * 1e3 / runs, 100 * t.first / total, t.second);
  std::vector<size_t> order(stepSeconds_.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return stepSeconds_[a] > stepSeconds_[b]; });
  const size_t shown = std::min<size_t>(order.size(), 40);
  std::fprintf(stderr, "  steps, slowest first (%zu of %zu):\n    %5s %-26s %-28s %9s %6s %9s %9s\n", shown, order.size(),
               "step", "op", "layer (or line)", "ms/run", "%", "GB/s", "GFLOP/s");
  for (size_t k = 0; k < shown; ++k) {
    const size_t s = order[k];
    const Step& step = program_.steps[s];
    const double seconds = stepSeconds_[s] / runs;
    const StepCost cost = costOf(step, program_);
    std::string where = step.layer.empty() ? step.location : step.layer;
    if (where.size() > 28) where = "..." + where.substr(where.size() - 25);
    std::fprintf(stderr, "    %5zu %-26s %-28s %9.3f %6.1f %9.1f ", s, step.op.substr(0, 26).c_str(), where.c_str(),
                 seconds * 1e3, 100 * stepSeconds_[s] / total, seconds > 0 ? double(cost.bytes) / seconds * 1e-9 : 0.0);
    if (cost.flops > 0 && seconds > 0)
      std::fprintf(stderr, "%9.1f\n", cost.flops / seconds * 1e-9);
    else
      std::fprintf(stderr, "%9s\n", "");
  }
  if (kernelSeconds_.empty()) return;
  // SPMD_PROFILE=kernels: the kernels inside the ops, slowest first.
  std::vector<std::pair<std::pair<std::string, std::string>, std::pair<double, int64_t>>> kernels(kernelSeconds_.begin(),
                                                                                                   kernelSeconds_.end());
  std::sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
  if (kernels.size() > 30) kernels.resize(30);
  std::fprintf(stderr, "  kernels by op, slowest first (%zu of %zu):\n    %-30s %-48s %9s %6s %9s\n", kernels.size(),
               kernelSeconds_.size(), "op", "kernel", "ms/run", "%", "launches");
  for (const auto& [key, t] : kernels) {
    std::string name = key.second;
    for (const char* prefix : {"spmd::runtime::kernels::", "spmd::runtime::"})
      for (size_t at; (at = name.find(prefix)) != std::string::npos;) name.erase(at, std::strlen(prefix));
    if (name.size() > 48) name = name.substr(0, 45) + "...";
    std::fprintf(stderr, "    %-30s %-48s %9.3f %6.1f %9.1f\n", key.first.substr(0, 30).c_str(), name.c_str(),
                 t.first * 1e3 / runs, 100 * t.first / total, double(t.second) / runs);
  }
}

void Executor::traceOnDevice(const std::vector<double>& t) {
  using Clock = std::chrono::steady_clock;
  if (!deviceTrack_) deviceTrack_ = timeline::track("device " + device_->name());
  // The device's clock placed on the host's: its last mark taken as now, when the call's
  // synchronisation has just returned (a GPU's spans may start a little late by that much).
  const Clock::time_point anchor = Clock::now();
  auto at = [&](double seconds) {
    return anchor - std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t.back() - seconds));
  };
  for (size_t s = 0; s < program_.steps.size(); ++s) {
    const Step& step = program_.steps[s];
    timeline::span(deviceTrack_, step.op, "device", at(t[s]), at(t[s + 1]), step.where(), costOf(step, program_).bytes);
  }
}

void Executor::readDeferredChecks(size_t upTo) {
  // Several words are gathered on the device first, so the host reads them in one copy (one wait).
  std::vector<size_t> checked;
  for (size_t s = 0; s < std::min(upTo, checks_.size()); ++s)
    if (checks_[s].flag) checked.push_back(s);
  lastCall_.checkWords = int64_t(checked.size());
  if (checked.empty()) return;
  std::vector<BadIndexFlag> words(checked.size());
  if (checked.size() == 1) {
    device_->copyToHost(reinterpret_cast<std::byte*>(words.data()),
                        reinterpret_cast<const std::byte*>(checks_[checked[0]].flag), sizeof(BadIndexFlag));
  } else {
    if (checkWordsHeld_ < checked.size()) {
      checkWords_ = device_->allocate(checked.size() * sizeof(BadIndexFlag));
      checkWordsHeld_ = checked.size();
    }
    for (size_t k = 0; k < checked.size(); ++k)
      device_->copyOnDevice(checkWords_.get() + k * sizeof(BadIndexFlag),
                            reinterpret_cast<const std::byte*>(checks_[checked[k]].flag), sizeof(BadIndexFlag));
    device_->copyToHost(reinterpret_cast<std::byte*>(words.data()), checkWords_.get(), words.size() * sizeof(BadIndexFlag));
  }
  for (size_t k = 0; k < checked.size(); ++k) {
    const size_t s = checked[k];
    const DeferredCheck& check = checks_[s];
    int32_t index = 0;
    int64_t position = 0;
    if (!decodeBadIndex(words[k], &index, &position)) continue;
    const Step& step = program_.steps[s];
    try {
      check.report(index, position);
    } catch (const ReplicaAborted&) {
      throw;  // another replica's failure stopped this one's collective; the group reports that one
    } catch (const std::exception& e) {
      throw Error("step " + std::to_string(s) + " '" + step.op + "' (" + step.where() + ") failed on " +
                  device_->name() + ": " + e.what());
    }
    throw Error("step " + std::to_string(s) + " '" + step.op + "' (" + step.where() + ") failed on " +
                device_->name() + ": its data check found a bad value but did not report it");
  }
}

void Executor::drain() noexcept {
  try {
    device_->synchronize();
  } catch (const std::exception&) {
    // the error being reported already says what failed; a later asynchronous one adds nothing
  }
}

Executor::~Executor() {
  drain();  // queued work must not outlive the arena it reads
  if (profileDevice_ && profiledRuns_ > 0) printDeviceProfile();
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

void Executor::checkFitsHost(const Program& program, int replicas, const std::string& where) {
  size_t each = residentBytes(program, true);
  checkHostMemory(each * size_t(replicas),
                  "program @" + program.name + " on " + where + " (" + std::to_string(replicas) +
                      " replica" + (replicas == 1 ? "" : "s") + " x " + formatBytes(each) +
                      ": arena " + formatBytes(program.arenaBytes) + " + other buffers " +
                      formatBytes(each - program.arenaBytes) + ")",
                  "lower the batch size or the model size, or use fewer devices");
}

std::vector<Array> Executor::run(std::span<const Array> inputs) {
  std::vector<Array> results;
  for (int id : program_.outputs)
    results.push_back(Array::zeros(program_.buffers[id].dtype, program_.buffers[id].shape));
  run(inputs, results);
  return results;
}

void Executor::run(std::span<const Array> inputs, std::span<Array> outputs) {
  std::vector<Input> in;
  for (const Array& a : inputs) in.push_back({a, nullptr});
  std::vector<Output> out;
  for (const Array& a : outputs) out.push_back(Output{.host = a});
  run(in, out);
}

void Executor::run(std::span<const Input> inputs, std::span<Output> outputs) {
  if (outputs.size() != program_.outputs.size())
    throw Error("program @" + program_.name + " has " + std::to_string(program_.outputs.size()) +
                " outputs, got room for " + std::to_string(outputs.size()));
  if (inputs.size() != program_.inputs.size())
    throw Error("program @" + program_.name + " takes " + std::to_string(program_.inputs.size()) +
                " inputs, got " + std::to_string(inputs.size()));
  std::lock_guard runLock(runMutex_);
  device_->activate();
  std::vector<std::byte*> data(buffers_.size());
  for (size_t id = 0; id < buffers_.size(); ++id) data[id] = buffers_[id].get();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BufferDesc& desc = program_.buffers[program_.inputs[i]];
    if (inputs[i].device) {  // already on this device (the caller checked its type)
      data[program_.inputs[i]] = inputs[i].device.get();
      continue;
    }
    const Array& array = inputs[i].host;
    if (!array.storage && desc.bytes() > 0)
      throw Error("input " + std::to_string(i) + " of @" + program_.name + " (" + std::string(dtypeName(desc.dtype)) +
                  shapeString(desc.shape) + ") holds no data: a default-constructed Array has none (make one with "
                  "Array::zeros or Array::of)");
    if (array.dtype != desc.dtype || array.shape != desc.shape || array.bytes() != desc.bytes())
      throw Error("input " + std::to_string(i) + " of @" + program_.name + " must be " +
                  std::string(dtypeName(desc.dtype)) + shapeString(desc.shape) + ", got " +
                  std::string(dtypeName(array.dtype)) + shapeString(array.shape));
    if (device_->hostAccessible())
      data[program_.inputs[i]] = array.data();
    else
      device_->copyToDevice(data[program_.inputs[i]], array.data(), desc.bytes());
  }
  // Outputs computed in their donor's buffers (the caller donated it and bound it in place, and
  // no other input shares them). One the plan left unplanned is otherwise computed in a fresh
  // buffer that the caller keeps (no copy either), or, read to the host, in buffers of its own.
  std::vector<bool> intoDonor(outputs.size(), false), direct(outputs.size(), false);
  std::vector<bool> donorBytes(buffers_.size(), false);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const int id = program_.outputs[k];
    const int donor = program_.outputDonors.empty() ? -1 : program_.outputDonors[k];
    std::byte* into = outputs[k].device.get();
    intoDonor[k] = inPlace_[k] && into && outputs[k].keep && !outputs[k].host.storage && donor >= 0 &&
                   inputs[size_t(donor)].device.get() == into;
    for (size_t i = 0; i < inputs.size() && intoDonor[k]; ++i)
      if (int(i) != donor && data[program_.inputs[i]] == into) intoDonor[k] = false;
    const bool unplanned = unplannedInPlace_[size_t(id)];
    if (intoDonor[k]) {
      data[id] = into;
      donorBytes[size_t(id)] = direct[k] = true;
    } else if (unplanned && outputs[k].keep && !outputs[k].host.storage && !into) {
      outputs[k].device = device_->allocate(program_.buffers[id].bytes());
      data[id] = outputs[k].device.get();
      direct[k] = true;
    } else if (unplanned && !buffers_[id]) {
      buffers_[id] = device_->allocate(program_.buffers[id].bytes());
      data[id] = buffers_[id].get();
    }
  }
  auto view = [&](int id) {
    const BufferDesc& desc = program_.buffers[id];
    return TensorView{data[id], desc.dtype, desc.shape, desc.layout};
  };
  const bool debug = debugNans_ || debugInfs_;
  if (debug)
    for (size_t i = 0; i < inputs.size(); ++i)
      checkFinite(view(program_.inputs[i]), "input " + std::to_string(i) + " of @" + program_.name);
  std::vector<TensorView> ins, outs;
  // Steps whose kernels left work running in the background (a collective behind the backward
  // pass): finished before a later step reads one of their outputs, or at the end.
  std::vector<std::pair<size_t, std::function<void()>>> pending;
  auto finish = [&](size_t k) {
    auto start = std::chrono::steady_clock::now();
    auto work = std::move(pending[k].second);
    size_t step = pending[k].first;
    pending.erase(pending.begin() + k);
    work();
    if (traceTrack_)
      timeline::span(traceTrack_, "wait for " + program_.steps[step].op, "wait", start, std::chrono::steady_clock::now(),
                     program_.steps[step].where());
    if (events_) events_->push_back({Event::BackgroundFinished, step});
    if (profile_) {
      auto& slot = opTime_["(waiting for background collectives)"];
      slot.first += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      slot.second++;
    }
  };
  // SPMD_PROFILE=device (from the second call on: the first prepares every kernel), and tracing
  // on a device with a clock (its own track): a mark before the first step and after each (the
  // device's clock, else, profiling, the host's).
  const bool profiling = profileDevice_ && runs_ > 0;
  std::unique_ptr<DeviceClock> clock = profiling || traceTrack_ ? device_->clock() : nullptr;
  const bool marking = profiling || clock != nullptr;
  std::vector<std::chrono::steady_clock::time_point> hostMarks;
  // SPMD_PROFILE=kernels: the device marks each kernel on the same clock, labelled ("": a step's
  // end, or the first step's start).
  std::vector<std::string> labels;
  const bool kernelMarks = profiling && profileKernels_ && clock;
  struct KernelMarks {
    Device* device = nullptr;
    ~KernelMarks() {
      if (device) device->markKernelsOn(nullptr, nullptr);
    }
  } kernelMarksOff;
  if (kernelMarks) device_->markKernelsOn(clock.get(), &labels), kernelMarksOff.device = device_.get();
  auto markStep = [&] {
    if (clock) {
      if (kernelMarks) labels.push_back("");
      clock->mark();
    } else {
      hostMarks.push_back(std::chrono::steady_clock::now());
    }
  };
  bool eagerSteps = false;
  auto runStep = [&](size_t s) {
    const Step& step = program_.steps[s];
    // A step writing into a donor's buffers waits for every collective still running in the
    // background: one of them may read that donor.
    const bool writesDonor =
        std::any_of(step.outputs.begin(), step.outputs.end(), [&](int id) { return donorBytes[size_t(id)]; });
    for (size_t k = 0; k < pending.size();) {
      const auto& theirs = program_.steps[pending[k].first].outputs;
      bool reads = writesDonor || std::any_of(step.inputs.begin(), step.inputs.end(), [&](int id) {
        return std::find(theirs.begin(), theirs.end(), id) != theirs.end();
      });
      if (reads) finish(k); else ++k;
    }
    ins.clear();
    outs.clear();
    for (int id : step.inputs) ins.push_back(view(id));
    for (int id : step.outputs) outs.push_back(view(id));
    std::function<void()> later;
    checks_[s] = {};
    // The debug mode checks every step as it runs, so its data checks report at once too.
    KernelCall call{step,          ins,     outs, caches_[s], comm_, device_.get(), &later, debug ? nullptr : &checks_[s],
                    &variants_[s], shared_, s};
    try {
      if (traceTrack_) {
        auto start = std::chrono::steady_clock::now();
        kernels_[s](call);
        int64_t bytes = 0;
        for (const TensorView& o : outs) bytes += o.numel() * int64_t(dtypeSize(o.dtype));
        timeline::span(traceTrack_, step.op, "step", start, std::chrono::steady_clock::now(), step.where(), bytes);
      } else if (!profile_) {
        kernels_[s](call);
      } else {
        auto start = std::chrono::steady_clock::now();
        kernels_[s](call);
        auto& slot = opTime_[step.op];
        slot.first += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        slot.second++;
      }
      if (events_) events_->push_back({Event::StepDone, s});
      if (marking) markStep();
      if (later) {
        if (events_) events_->push_back({Event::BackgroundStarted, s});
        pending.emplace_back(s, std::move(later));
        if (debug) finish(pending.size() - 1);
      }
      if (debug)
        for (size_t o = 0; o < outs.size(); ++o) checkFinite(outs[o], "its output " + std::to_string(o));
    } catch (const CaptureBroken&) {
      throw;  // recording a graph: the step runs again outside it (StepGraph)
    } catch (const ReplicaAborted&) {
      drain();
      throw;  // another replica's failure; the group reports that one
    } catch (const std::exception& e) {
      drain();
      // An earlier step's failed data check is the error to report (steps run one by one: not
      // while a graph records or replays them); one that cannot be read (the device failed
      // too) leaves this step's.
      if (eagerSteps) {
        try {
          readDeferredChecks(s);
        } catch (const Error&) {
          throw;
        } catch (...) {
        }
      }
      throw Error("step " + std::to_string(s) + " '" + step.op + "' (" + step.where() +
                  ") failed on " + device_->name() + ": " + e.what());
    }
  };
  GraphCapture* graphs = graphsFor(debug);
  if (marking) markStep();  // the start of the first step
  const int64_t waitsBefore = device_->hostWaits();
  lastCall_ = {};
  lastCall_.outputsInPlace = std::count(intoDonor.begin(), intoDonor.end(), true);
  auto eager = [&] {
    eagerSteps = true;
    for (size_t s = 0; s < program_.steps.size(); ++s) runStep(s);
    lastCall_.stepsCalled = int64_t(program_.steps.size());
  };
  if (!graphs) {
    eager();
  } else if (graph_ && graph_->pointers() == data) {
    graph_->replay(*graphs, runStep);
    lastCall_.graphLaunches = int64_t(graph_->graphs());
    lastCall_.stepsCalled = int64_t(graph_->splitters().size());
  } else if (graph_ && ++recaptures_ > 1) {  // buffers that move every call: graphs would not pay
    turnGraphsOff("its buffers moved between calls again (inputs that are not donated move every call)");
    graph_.reset();
    eager();
  } else {
    graph_ = std::make_unique<StepGraph>(StepGraph::record(*graphs, program_.steps.size(), data, runStep));
    lastCall_.graphLaunches = int64_t(graph_->graphs());
    lastCall_.stepsCalled = int64_t(program_.steps.size());  // recording calls every kernel
  }

  try {
    while (!pending.empty()) finish(0);
  } catch (const ReplicaAborted&) {
    drain();
    throw;
  }
  lastCall_.hostWaitsInSteps = device_->hostWaits() - waitsBefore;
  ++runs_;
  // Outputs that pass an input through are copied first: a later output may be written into
  // a donated input's buffer (the caller never donates into such a passthrough output).
  std::vector<bool> isInput(program_.buffers.size());
  for (int id : program_.inputs) isInput[id] = true;
  for (bool passthrough : {true, false})
    for (size_t i = 0; i < outputs.size(); ++i) {
      int id = program_.outputs[i];
      if (isInput[id] != passthrough || outputs[i].host.storage || !outputs[i].keep || direct[i]) continue;
      const BufferDesc& desc = program_.buffers[id];
      if (!outputs[i].device) outputs[i].device = device_->allocate(desc.bytes());
      device_->copyOnDevice(outputs[i].device.get(), data[id], desc.bytes());
    }
  device_->synchronize();  // asynchronous devices: finish reading the caller's inputs, report errors
  readDeferredChecks(program_.steps.size());
  if (marking) {
    std::vector<double> t;
    if (clock)
      t = clock->seconds();
    if (kernelMarks) {
      device_->markKernelsOn(nullptr, nullptr), kernelMarksOff.device = nullptr;
      if (t.size() == labels.size()) addKernelTimes(labels, t);
      std::vector<double> steps;  // the step boundaries alone
      for (size_t i = 0; i < t.size() && i < labels.size(); ++i)
        if (labels[i].empty()) steps.push_back(t[i]);
      t = std::move(steps);
    }
    if (!clock)
      for (const auto& m : hostMarks) t.push_back(std::chrono::duration<double>(m - hostMarks.front()).count());
    if (t.size() == program_.steps.size() + 1) {
      if (profiling) {
        for (size_t s = 0; s < program_.steps.size(); ++s) stepSeconds_[s] += t[s + 1] - t[s];
        ++profiledRuns_;
        deviceClock_ = clock != nullptr;
      }
      if (traceTrack_ && clock) traceOnDevice(t);
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Array& host = outputs[i].host;
    if (!host.storage) continue;
    const BufferDesc& desc = program_.buffers[program_.outputs[i]];
    if (host.dtype != desc.dtype || host.shape != desc.shape)
      throw Error("output " + std::to_string(i) + " of @" + program_.name + " is " +
                  std::string(dtypeName(desc.dtype)) + shapeString(desc.shape) +
                  ", but the destination is " + std::string(dtypeName(host.dtype)) +
                  shapeString(host.shape));
    device_->copyToHost(host.data(), data[program_.outputs[i]], desc.bytes());
  }
}

}  // namespace spmd::runtime
