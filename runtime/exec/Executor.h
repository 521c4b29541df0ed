// Runs a Program on one Device: allocates the memory plan's arena and every unplanned buffer
// once, then per call binds the inputs, runs the steps in order and returns the outputs.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <vector>

#include "runtime/base/Array.h"
#include "runtime/device/Communicator.h"
#include "runtime/device/Device.h"
#include "runtime/exec/CallCounts.h"
#include "runtime/exec/StepGraph.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

// Whether SPMD_DEBUG_NANS / SPMD_DEBUG_INFS ask for the debug mode (set and not "0").
bool debugNansFromEnvironment();
bool debugInfsFromEnvironment();

// Where an input of one replica comes from: a buffer already on the executor's device (bound
// in place, no copy) or else a host array (copied in, or bound in place on a host device).
struct Input {
  Array host{};
  std::shared_ptr<std::byte> device{};
};

// Where an output of one replica goes: into `host` when it has storage (a copy to the host);
// else, with `keep`, it stays on the device, in `device` when that is set (a donated input's
// buffer, updated in place) or in a fresh buffer stored there; else nowhere.
struct Output {
  Array host{};
  bool keep = false;
  std::shared_ptr<std::byte> device{};
};

class Executor {
 public:
  // Fails with a clear error when the device has no kernel for one of the program's ops.
  Executor(Program program, std::shared_ptr<Device> device);
  // With SPMD_PROFILE set, prints the time spent per op over all runs to stderr; with
  // SPMD_PROFILE=device, each step's time on the device's own clock (Device::clock: CUDA events,
  // the simulator's stream; the host's clock where work runs when called), by op and step, with
  // the GB/s and GFLOP/s it reached (runtime/program/StepCost.h); with SPMD_PROFILE=kernels, that
  // and each kernel a step launches on a device with a clock (Device::markKernel), by op and
  // kernel.
  ~Executor();

  // run() is safe to call from several threads: calls queue (the arena and the per-step
  // kernel caches belong to one call at a time).
  // Returns every output as a fresh host Array.
  std::vector<Array> run(std::span<const Array> inputs);
  // Copies output i into outputs[i] (which must have its dtype and shape); an output Array
  // without storage is skipped (a replicated output another replica returns).
  void run(std::span<const Array> inputs, std::span<Array> outputs);
  // The general form: inputs on the host or on this device, outputs to the host or kept on it.
  void run(std::span<const Input> inputs, std::span<Output> outputs);
  // The collectives of this replica; needed by programs with collective ops.
  void setCommunicator(Communicator* comm) { comm_ = comm; }
  // Values the group's in-process replicas make once per call (null: none shared).
  void setSharedValues(SharedValues* shared) { shared_ = shared; }
  // Debug mode (jax_debug_nans / jax_debug_infs): after every step, check its float outputs
  // (and the inputs before the first step) and stop at the first NaN (and, with `infs`, the
  // first infinity), naming the step, its layer and line, and the device. Both start from
  // SPMD_DEBUG_NANS=1 / SPMD_DEBUG_INFS=1; this turns them on (never off).
  void enableDebugNonFinite(bool nans, bool infs) { debugNans_ |= nans, debugInfs_ |= infs; }
  const Program& program() const { return program_; }
  // The order in which a run's work happened, appended to `log` (null: not recorded): every
  // step as its kernel returns, and every collective left running in the background (behind
  // the backward pass) as its kernel hands it off and as the executor waits for its result.
  struct Event {
    enum Kind { StepDone, BackgroundStarted, BackgroundFinished } kind;
    size_t step;
  };
  void recordEvents(std::vector<Event>* log) { events_ = log; }
  // Before any allocation: throws a clear error when `replicas` host replicas of `program`
  // (on `where`, e.g. "cpu:4") do not fit in the host memory that is available.
  static void checkFitsHost(const Program& program, int replicas, const std::string& where);
  const Device& device() const { return *device_; }
  // The graphs this executor replays (null before its second call, on devices without graphs,
  // and with SPMD_CUDA_GRAPHS=0), and why they are off when they are (runtime/exec/StepGraph.h).
  const StepGraph* stepGraph() const { return graph_.get(); }
  const std::string& graphsOff() const { return graphsOff_; }
  // What the last call did (graphs launched, kernels called, host waits while the steps ran).
  const CallCounts& lastCall() const { return lastCall_; }
  // Chooses the variant of every step whose kernel has variants (Kernel::choose), on scratch
  // buffers of the steps' shapes filled with fixed values, with `exchange` (a job's processes,
  // or null) deciding whose choice holds. The steps' first calls then take these choices. Run
  // on the replica's thread (the variants' threads count), before any collective.
  void chooseKernels(ChoiceExchange* exchange);
  // For a step whose kernel has variants, the one it ran and why ("" before its first call).
  const std::string& variantOf(size_t step) const { return variants_.at(step); }

 private:
  Program program_;
  std::shared_ptr<Device> device_;
  std::vector<std::shared_ptr<std::byte>> buffers_;  // by buffer id; null for host-bound inputs
  // By output: computed straight into its donated input's buffers when the call donates
  // (runtime::inPlaceOutputs). By buffer: such an output the plan left out of the arena
  // (runtime::unplannedInPlace), which gets buffers of its own only on a call that does not donate.
  std::vector<bool> inPlace_, unplannedInPlace_;
  std::vector<KernelFn> kernels_;                    // by step
  std::vector<std::shared_ptr<void>> caches_;        // by step
  std::vector<std::string> variants_;                // by step: the variant its kernel ran, and why
  // By step: the data check its kernel left on the device when it last ran (kept for the graphs'
  // replays, which do not call the kernel), read after each call's end-of-step synchronisation.
  std::vector<DeferredCheck> checks_;
  std::shared_ptr<std::byte> checkWords_;  // device: the checks' words gathered for one read
  size_t checkWordsHeld_ = 0;
  CallCounts lastCall_;
  // Throws the first failed check of checks_ before step `upTo`, as that step's own error: after
  // the call's steps (every step), or when step `upTo` failed (a bad value an earlier step's
  // deferred check found is the cause to report, e.g. a bad index checked on the device before
  // a lookup that checks its own ids on the host).
  void readDeferredChecks(size_t upTo);
  Communicator* comm_ = nullptr;
  SharedValues* shared_ = nullptr;
  std::mutex runMutex_;
  bool profile_ = false;
  int traceTrack_ = 0;  // the timeline's track of this replica (runtime/base/Timeline.h); 0: not tracing
  int deviceTrack_ = 0;  // its device's own track: each step on the device's clock (Device::clock)
  // Spans on deviceTrack_ from the marks' times `t` (seconds since the first; one per step + 1).
  void traceOnDevice(const std::vector<double>& t);
  bool debugNans_ = false, debugInfs_ = false;
  std::vector<Event>* events_ = nullptr;
  // Waits for work queued on an asynchronous device, dropping its errors (after a failure, and
  // before the buffers are freed).
  void drain() noexcept;
  // Throws when `view` (on the device) holds a value the debug mode stops at; `what` names it.
  void checkFinite(const TensorView& view, const std::string& what);
  std::map<std::string, std::pair<double, int64_t>> opTime_;  // seconds, calls (SPMD_PROFILE)
  bool profileDevice_ = false;        // SPMD_PROFILE=device
  std::vector<double> stepSeconds_;   // by step, summed over the profiled runs
  int64_t profiledRuns_ = 0;
  bool deviceClock_ = false;          // the times are the device's own (else the host's)
  bool profileKernels_ = false;       // SPMD_PROFILE=kernels
  // (op, kernel) -> device seconds summed over the profiled runs, and launches.
  std::map<std::pair<std::string, std::string>, std::pair<double, int64_t>> kernelSeconds_;
  void addKernelTimes(const std::vector<std::string>& labels, const std::vector<double>& t);
  void printDeviceProfile() const;
  int64_t runs_ = 0;
  bool graphsWanted_ = StepGraph::wanted();
  std::unique_ptr<StepGraph> graph_;
  std::string graphsOff_;
  int recaptures_ = 0;
  // The device's graphs for this call, or null: eager (first call, no graphs, off, or a mode
  // that needs the steps one by one).
  GraphCapture* graphsFor(bool debug);
  void turnGraphsOff(const std::string& why);
};

}  // namespace spmd::runtime
