// Internal to the frontend: what spmd::jit and spmd::pmap share about their compile caches. The
// cache key of a compiled function (argument structure plus each input leaf's type, and for pmap
// how it is mapped), a readable reason a call recompiled, and the CompileLog both cores keep
// (count, reason, the last traced IR and Program), exposed to users by CompiledFunction.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "compiler/Pipeline.h"
#include "frontend/Tensor.h"
#include "runtime/exec/CallCounts.h"

namespace spmd::detail {

class Trace;

// `tags[i]`, when given, prefixes leaf i's type (pmap: "split:", "stacked:", "replicated:").
std::string signatureOf(const std::vector<Tensor>& leaves, const std::string& structure,
                        const std::vector<std::string>& tags = {});
// FNV-1a of `text`: names dump directories, fingerprints traced programs across processes.
uint64_t fnv1a(const std::string& text);
// Why `now` differs from `before` ("first call", "argument 2.fc.weight was f32[8], now f32[4]",
// ...); `names[i]` is leaf i's argument path ("input leaf i" without names).
std::string explain(const std::string& before, const std::string& now, const std::vector<std::string>& names = {});

class CompileLog {
 public:
  int compileCount() const { return compileCount_; }
  const std::string& lastCompileReason() const { return lastReason_; }
  const std::string& lastTracedIr() const { return lastTracedIr_; }
  const std::string& lastProgramText() const { return lastProgramText_; }
  const runtime::Program& lastProgram() const { return lastProgram_; }
  const std::string& lastDumpDir() const { return lastDumpDir_; }
  double lastCompileSeconds() const { return lastCompileSeconds_; }

 protected:
  // `signature` is not cached: records why (and prints it under SPMD_LOG_COMPILES).
  void beginCompile(const std::string& signature, const std::string& what, const std::vector<std::string>& names = {});
  // Keeps the finished trace's IR, runs the pipeline on it and names the Program.
  runtime::Program compileTrace(Trace& trace, const CompileOptions& options, const std::string& name);
  // Every call, after the cache lookup: the signature the next recompile is compared with.
  void called(const std::string& signature) { lastSignature_ = signature; }
  // After the call that compiled has run its first step: the time since beginCompile.
  void firstStepDone();

 private:
  std::string lastSignature_, lastReason_, lastTracedIr_, lastProgramText_, lastDumpDir_;
  std::string compilingSignature_;  // beginCompile's, for the dump directory's name
  std::string compilingWhat_;       // beginCompile's, for the timeline
  runtime::Program lastProgram_;
  int compileCount_ = 0;
  std::chrono::steady_clock::time_point compileStart_;
  bool compiling_ = false;
  double lastCompileSeconds_ = 0;
};

// The user-facing accessors of a jitted or pmapped function, forwarded to its core.
template <typename Core>
class CompiledFunction {
 public:
  // How many times this function was traced and compiled, and why the last time.
  int compileCount() const { return core_->compileCount(); }
  const std::string& lastCompileReason() const { return core_->lastCompileReason(); }
  const std::string& lastTracedIr() const { return core_->lastTracedIr(); }
  const std::string& lastProgramText() const { return core_->lastProgramText(); }
  // The last lowered Program itself (what a backend runs; see runtime/program/Program.h).
  const runtime::Program& lastProgram() const { return core_->lastProgram(); }
  // Where the last compilation wrote its IR dumps (options' dumpDir or SPMD_DUMP_IR, then
  // "<name>-<hash>/"); empty when dumps are off.
  const std::string& lastDumpDir() const { return core_->lastDumpDir(); }
  // Seconds from the start of the call that last compiled to its first finished step: trace,
  // passes, lowering, the replica group, and the first run, which prepares the kernels (oneDNN
  // primitives, NVRTC modules). What a user waits for before training starts.
  double lastCompileSeconds() const { return core_->lastCompileSeconds(); }
  // What the last call's step did on its devices, summed over the replicas: graphs launched,
  // kernels called, host waits while the steps ran (runtime/exec/CallCounts.h). A training step
  // replayed as one graph per replica: {replicas, 0, 0}.
  runtime::CallCounts lastCall() const { return core_->lastCall(); }
  // The bytes one replica's memory plan holds during a step of the last compiled program: its
  // arena, its inputs (parameters, optimizer state, its rows of the batch) and other buffers
  // (runtime::residentBytes); with gradient accumulation both parts' arenas, the accumulated
  // gradients' fold at its deepest and the mapped outputs' parts. From the compiler's plan, not
  // a measurement: the process also holds host copies, libraries' caches and the compiler.
  size_t lastPlannedBytes() const { return core_->lastPlannedBytes(); }

 protected:
  explicit CompiledFunction(std::shared_ptr<Core> core) : core_(std::move(core)) {}
  std::shared_ptr<Core> core_;
};

}  // namespace spmd::detail
