// The compiler pipeline: verify the traced module, run the passes in order (verifying after
// each, dumping each result when asked), then lower to a runtime Program.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/program/Program.h"

namespace mlir {
class ModuleOp;
}

namespace spmd {

struct CompileOptions {
  // Directory for numbered per-pass dumps (NN-<pass>.mlir), program.txt and program.spmd. Empty: use the
  // SPMD_DUMP_IR environment variable; no dumps if that is unset too.
  std::string dumpDir = {};
  // Subdirectory of dumpDir for this compilation (jit/pmap: "<name>-<hash of signature and
  // traced IR>"), so different functions and signatures never overwrite each other's dumps.
  std::string dumpName = {};
  // Function to lower; the module's only function when empty.
  std::string entry = "main";
  // Mapped functions (spmd::pmap): report each pmean the compiler would insert as an error.
  bool strict = false;
  // ZeRO-1 (passes/ShardUpdate): the optimizer update runs on each replica's 1/N slice, its state
  // and the parameters stay sharded between steps.
  bool shardUpdate = false;
  // FSDP (passes/GatherAtUse, with shardUpdate): each sliced parameter is gathered right before
  // each op that reads it instead of once at the top of the step, so the full tensor lives only
  // while that op runs.
  bool gatherAtUse = false;
  // Largest combined gradient all-reduce, in bytes.
  int64_t bucketBytes = 25 << 20;
  // Largest combined reduce-scatter or all-gather of ZeRO-1 / FSDP (passes/
  // CombineShardedCollectives), in bytes: smaller than the all-reduce's, since a bucket's
  // gradients wait for its last one and its gathered parameters are live together, and memory is
  // what sharding is for.
  int64_t shardedBucketBytes = 4 << 20;
  // FSDP: issue each layer's parameter gathers one layer ahead (passes/CombineShardedCollectives
  // `prefetch`), so that a communicator with a thread of its own (across processes) gathers behind
  // the previous layer; the plan holds one more layer's gathered parameters.
  bool prefetchGathers = false;
  // Place intermediate buffers in one arena by lifetime (compiler/PlanMemory). Off: every buffer
  // gets its own allocation (for comparing against the plan).
  bool planMemory = true;
  // Fuse elementwise chains into spmd.fused ops (passes/FuseElementwise), one kernel each.
  bool fuseElementwise = true;
  // The backend's activation layout (runtime::Driver::activationLayout: "nChw8c" or "nChw16c"
  // for the CPU backend, "nhwc" for CUDA with SPMD_CHANNELS_LAST=1): passes/AssignLayouts gives
  // activations that layout where the kernels take it. "": every tensor stays plain.
  std::string activationLayout = {};
  // Keep convolutions and matmuls on bf16 in bf16 for the backend's bf16 kernels
  // (runtime::Driver::bf16Kernels; passes/WidenBf16's native-kernels). Off: they run in f32
  // between roundings, as every other bf16 op, with the same bits on every backend and ISA.
  bool bf16Kernels = false;
  // Bytes one replica may hold while the step runs (runtime::residentBytes of the planned
  // Program). Over it, the compiler recomputes layers in the backward pass (passes/MarkRemat:
  // the fewest of its candidate segments that make the plan fit, found by compiling each
  // choice; the choice is in the dump's memory-budget.txt), or fails naming the largest values
  // live at the plan's fullest step. 0: no budget.
  int64_t memoryBudget = 0;
};

// Runs the pipeline on `module` in place and returns the lowered Program (with a memory budget,
// after compiling copies of it to choose what to recompute). Throws spmd::Error
// naming the pass, the op and the user's source line when a pass or the verifier fails.
runtime::Program compile(mlir::ModuleOp module, const CompileOptions& options = {});

// Where compile() writes its dumps for `options` ("" when it writes none).
std::string dumpDirectory(const CompileOptions& options);

}  // namespace spmd
