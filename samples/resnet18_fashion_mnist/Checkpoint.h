// The sample's checkpoint: the trees (params., state., opt.), where the training loop is, and
// the flags that must agree to continue the same run, in one safetensors file written
// atomically (frontend/io/Safetensors.h).
#pragma once

#include <map>
#include <string>

#include "Flags.h"
#include "frontend/Tree.h"

namespace sample {

// Where the training loop is: the next epoch (0-based) and batch to run, steps taken, and the
// running sums of the epoch in progress (lossSum: the loss summed over examples, so a short
// last batch weighs by its examples).
struct Position {
  int64_t epoch = 0, batch = 0, step = 0;
  double lossSum = 0, seconds = 0, dataWait = 0;
  int64_t correct = 0, seen = 0;
  std::string csv;  // metrics rows of finished epochs
};

// The flags a checkpoint must agree with to continue the same run.
std::map<std::string, std::string> runIdentity(const Flags& f);

// Writes `path` from the trees at `at`; refuses (keeping the previous file) when a tree holds a
// NaN or an infinity. `layout` and `threads` say how the run ran, for --resume's notes.
void saveCheckpoint(const std::string& path, const Flags& f, const std::string& layout, int threads,
                    const spmd::Tree& params, const spmd::Tree& state, const spmd::Tree& opt, const Position& at);

// What --resume read: where the run was, how it ran, and from which file.
struct Resumed {
  Position at;
  std::string layout, threads, path;
  std::string kernelChoices;  // the timed kernel choices its run ran (KernelChoices::used); "" before they were kept
  // What else set its bits and may change on resume (runBits), as it recorded them; absent keys
  // (older checkpoints) are missing.
  std::map<std::string, std::string> bits;
};

// The settings besides the layout and threads that set a run's bits but not its model: the
// backend, --precision, --layouts and the reduction mode (SPMD_REDUCE).
std::map<std::string, std::string> runBits(const Flags& f);
// Reads --resume's checkpoint (a file or an --out directory) into the trees, after checking it is
// a checkpoint of this sample trained with the same flags and that every tensor fits the model.
Resumed loadCheckpoint(const Flags& f, spmd::Tree& params, spmd::Tree& state, spmd::Tree& opt);

}  // namespace sample
