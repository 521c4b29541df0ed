// Gradient accumulation's two parts of one step (PmapOptions::accumulate): the part each replica
// runs once per micro-batch and the part it runs once per step, with how they connect and the
// whole step's call contract. compiler/SplitAccumulation makes it; runtime/exec/AccumulatedCall
// runs it.
#pragma once

#include <string>
#include <vector>

#include "runtime/program/Catalog.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

struct AccumulationSplit {
  Program micro, apply;
  // Original program input index of each micro / apply input; -1 for the apply part's leading
  // inputs, the accumulated operands (apply.inputs[j] for j < accumulated is micro output
  // microMapped + j, summed over the micro-batches).
  std::vector<int> microInputs, applyInputs;
  int accumulated = 0, microMapped = 0;
  // How accumulated operand j folds over the micro-batches: Sum (a sum's or a mean's operand),
  // Max or Min (its all-reduce's reduction).
  std::vector<Reduction> folds;
  // Where each all-reduce that reduces within every micro-batch runs (its result feeds work that
  // varies with the batch: cross-replica BatchNorm's statistics), once each: it reduces over one
  // micro-batch's replicas, not every virtual replica, so the step differs from more devices'.
  std::vector<std::string> withinMicroBatch;
  // An accumulated operand the micro part computes (not one it passes through) is paired in
  // micro.outputDonors with an input of its own that only gives its bytes, so the operand is
  // computed straight into the fold's leaf, not in the arena and copied out (intoLeaf). Those
  // inputs follow microInputs' in operand order.
  // Where each original output comes from: micro output (a mapped output: the micro-batches'
  // parts one after another) or apply output.
  struct Source {
    bool micro = false;
    int index = 0;
  };
  std::vector<Source> outputs;
  // The whole step's call contract (Program::inputPlacements, outputPlacements, outputDonors)
  // and its inputs' and outputs' types for one micro-batch (a mapped one's rows are the
  // micro-batch's; the caller's are microBatches times as many).
  std::vector<Placement> inputPlacements, outputPlacements;
  std::vector<int> outputDonors;
  std::vector<BufferDesc> inputTypes, outputTypes;
};

// Whether accumulated operand j is computed straight into the fold's leaf the caller passes.
inline bool intoLeaf(const AccumulationSplit& split, int j) {
  const std::vector<int>& donors = split.micro.outputDonors;
  return !donors.empty() && donors[size_t(split.microMapped + j)] >= 0;
}

}  // namespace spmd::runtime
