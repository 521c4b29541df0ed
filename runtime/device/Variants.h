// Kernel variants: the implementations a backend has for one op, as one ordered list of data
// (name, where it runs, where it was found to pay, the function, why it exists), instead of a
// chain of conditions inside the kernel. Which one a step runs is decided once per step:
//   - SPMD_KERNELS pins a variant by name where it runs (runtime/device/KernelChoice.h);
//   - else, when more than one runs, the fastest on the step's own shapes, timed on this machine
//     (each variant once to warm up, then in turn, one run a round, while two are within 1.5x
//     of each other, at most 3 rounds and none after 50 ms; the least time kept; a run whose
//     thread waited for a core, taken by another process, counts only where its variant has no
//     other, and such a variant runs again, up to 6 rounds and 250 ms), remembered
//     per machine kind in the kernel cache and, in a job of several processes, process 0's
//     choice;
//   - SPMD_KERNEL_TIMING=0: the list's order decides (the first variant that runs and `pays`,
//     the hand-tuned rule each variant carries), as before variants were timed;
//   - a step on bf16 operands where the set widens them (VariantSet::widensBf16) has the f32
//     variants among its candidates, each run between bf16 roundings;
//   - SPMD_THREAD_INVARIANT=1: only variants whose bits do not depend on the thread count are
//     candidates (pins included), so a run's bits do not depend on its threads per replica;
//   - SPMD_TIGHT_ROUNDING=1: no variant whose f32 rounding error is several times the direct
//     kernels' (looseRounding: Winograd F(4x4, 3x3)) is a candidate (pins included).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/device/Kernel.h"

namespace spmd::runtime {

class ChoiceExchange;

struct KernelVariant {
  const char* name;             // what SPMD_KERNELS, the logs and `spmd-run --kernels` call it
  const char* why;              // one line: what it is and why it exists
  bool threadInvariant = false;  // its bits do not depend on the number of threads
  bool (*runs)(const KernelCall&) = nullptr;  // computes this step (null: every step)
  bool (*pays)(const KernelCall&) = nullptr;  // taken untimed where it runs (null: always)
  KernelFn fn = nullptr;
  // Its f32 rounding error is several times the direct kernels' (measured in its file), if
  // still far below bf16's or TF32's: left out under SPMD_TIGHT_ROUNDING=1.
  bool looseRounding = false;
};

// One op's variants on one backend, in the untimed order of preference; the last one runs on
// every step the op's kernel takes.
struct VariantSet {
  const char* op;
  const char* backend;
  std::vector<KernelVariant> variants;
  std::string (*device)();   // what a timed choice is valid for: "AMD EPYC (family 25 model 17), oneDNN avx512_core_bf16, spmd avx512"
  std::string (*library)();  // "oneDNN 2.7.3"
  std::string (*setting)();  // what else a variant's speed or bits depend on: "threads 2"
  // Where it holds for a step on bf16 operands, each variant that does not take bf16 but takes the
  // step's f32 form is a candidate too, run between bf16 roundings (runtime/device/WidenedBf16.h:
  // its operands widened exactly, its bf16 results rounded once). The CPU's, where oneDNN's bf16
  // kernels run (AVX512-BF16, AMX): its bf16 filter gradients on few pixels are slower than our
  // f32 Winograd on the widened operands. Null: none.
  bool (*widensBf16)(const KernelCall&) = nullptr;
  // Runs an f32 variant so (null: widenedBf16 with its plain loops).
  void (*runWidened)(KernelCall&, KernelFn) = nullptr;
};

// Runs the step's variant, choosing it on the step's first call (kept in call.cache).
void runVariant(KernelCall& call, const VariantSet& set);
// Chooses the step's variant without keeping it, on the buffers `call` points at (which it
// overwrites): the executor's pass before a job's first call, with `exchange` its processes.
void chooseVariant(KernelCall& call, const VariantSet& set, ChoiceExchange* exchange);
// Whether steps are timed (SPMD_KERNEL_TIMING, default on); read once.
bool kernelTiming();
// Whether cuDNN's deterministic convolution algorithms are timed (SPMD_CUDNN_SEARCH, default on;
// 0: its heuristic's first, untimed); read once.
bool cudnnSearch();
// Whether cuDNN's graph API offers its engine configurations beside the legacy algorithms
// (SPMD_CUDNN_GRAPH, default off until it has run on a GPU; runtime/cuda/CudnnGraph.h); read at
// each step's first call.
bool cudnnGraphEngines();
// Whether the CUDA backend (and the simulator, which stands in for it) gives 4-D activations the
// channels-last layout "nhwc" (SPMD_CHANNELS_LAST, default off until it has run on a GPU;
// runtime/program/Layouts.h): cuDNN's tensor-core convolutions read it without transposing, our
// batch norms and fused kernels in place; read at each compilation.
bool cudaChannelsLast();
// Whether only thread-invariant variants run (SPMD_THREAD_INVARIANT, default off); read once.
// Kernels read it when a step's state is made (its first call).
bool threadInvariantKernels();
// Tests: sets it for the steps whose first call comes after (nullopt: the variable's value again).
void setThreadInvariantKernels(std::optional<bool> on);
// Whether variants with loose rounding are left out (SPMD_TIGHT_ROUNDING, default off); read at
// each step's first call, as threadInvariantKernels.
bool tightRoundingKernels();
void setTightRoundingKernels(std::optional<bool> on);

}  // namespace spmd::runtime
