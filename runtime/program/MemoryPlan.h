// Buffer lifetimes of a Program and the check that its memory plan is safe. The plan itself is
// made by the compiler (compiler/PlanMemory); the runtime checks it before trusting it, since a
// Program may come from a file.
#pragma once

#include <vector>

#include "runtime/program/Accumulation.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

// Steps during which a buffer must hold its value: from the step that writes it (-1 for inputs
// and constants) to the last step that reads it (steps.size() for program outputs). Two buffers
// whose lifetimes share a step may not share memory; a step's inputs and outputs never do, but
// for the reshapes reshapeRoots names.
struct Lifetime {
  int first = 0, last = 0;
  bool overlaps(const Lifetime& other) const { return first <= other.last && other.first <= last; }
};

std::vector<Lifetime> lifetimes(const Program& program);

// Buffers that may share their bytes although both are live: a reshape's result with its input
// (a reshape moves no byte), where both are plain row-major, neither is an input or a constant,
// and each is written by one step only (an accumulator written again would change the other).
// Each buffer's root: the first buffer of its chain of such reshapes, itself where it has none.
// The plan puts a chain at one offset and the reshape steps then copy nothing (the kernels do
// nothing when the result is their input's memory); the check lets a chain overlap itself only
// at one offset.
std::vector<int> reshapeRoots(const Program& program);

// `life` with each reshape chain's root live while any of its buffers is (the chain as one buffer).
std::vector<Lifetime> chainLifetimes(std::vector<Lifetime> life, const std::vector<int>& root);

// Per output: whether its steps may compute it straight into its donor's buffers
// (Program::outputDonors) when the caller donates that input, as jax's input_output_aliases do,
// so that no copy follows the step and the plan gives the output no bytes of its own. It holds
// when the output is written by one step and nothing reads its donor after that step, the
// donor is not itself returned, and the output is no reshape's bytes; where that step also reads
// the donor, it must be a `fused` step (each element read before it is written, in every
// backend's kernel) with the donor and the output in one segment and one layout.
std::vector<bool> inPlaceOutputs(const Program& program);
// By buffer: an output inPlaceOutputs allows that the plan left out of the arena, whose bytes
// are its donor's when the call donates.
std::vector<bool> unplannedInPlace(const Program& program);

// Arena offsets are multiples of this, enough for CPU vector loads and cuDNN/cuBLAS alignment.
inline constexpr int64_t kArenaAlignment = 256;

// The bytes one replica holds while the program runs: its arena and every buffer outside it
// (inputs, constants, unplanned buffers; inputs left out where the device reads them in place
// from the host: `hostAccessible`). An unplanned output that inPlaceOutputs allows counts as its
// donor's bytes (the caller donates, as training loops do; a call that does not gets it besides).
size_t residentBytes(const Program& program, bool hostAccessible);
// The same for a step split for gradient accumulation over `microBatches` (runtime/exec/
// AccumulatedCall): the whole step's inputs at their local shapes (a mapped one holds every
// micro-batch's rows; left out where `hostAccessible`), both parts' arenas and other buffers
// (each part's inputs are those inputs or the fold's), the fold of the accumulated operands at
// its deepest (log2(microBatches) complete subtrees and the newest micro-batch's leaf, each an
// operand's bytes) and the mapped outputs' parts, gathered a micro-batch at a time (with the
// newest micro-batch's copy). `atOnce` micro-batches running together (PmapOptions::
// microBatchesAtOnce) hold a micro part's arena and buffers, a leaf and a copy each.
size_t residentBytes(const AccumulationSplit& split, int microBatches, bool hostAccessible, int atOnce = 1);

// The step at which the most bytes are live (inputs and constants count throughout, a step's
// inputs and outputs at that step, a reshape chain once, as its root), those bytes, and the
// buffers live there, largest first: what a memory budget's error names.
struct PeakLive {
  int step = -1;
  size_t bytes = 0;
  std::vector<int> buffers;
};
PeakLive peakLive(const Program& program);

// Throws an Error naming the buffers when a planned buffer lies outside the arena, is misaligned,
// is an input or constant, or shares bytes with a buffer that is live at the same time (other
// than one of its own reshape chain at the same offset).
void checkMemoryPlan(const Program& program);

}  // namespace spmd::runtime
