// Gradient accumulation's two parts of one step (PmapOptions::accumulate): the part each replica
// runs once per micro-batch and the part it runs once per step, with how they connect and the
// whole step's call contract. compiler/SplitAccumulation makes it; runtime/exec/AccumulatedCall
// runs it.
#pragma once

#include <vector>

#include "runtime/program/Program.h"

namespace spmd::runtime {

struct AccumulationSplit {
  Program micro, apply;
  // Original program input index of each micro / apply input; -1 for the apply part's leading
  // inputs, the accumulated operands (apply.inputs[j] for j < accumulated is micro output
  // microMapped + j, summed over the micro-batches).
  std::vector<int> microInputs, applyInputs;
  int accumulated = 0, microMapped = 0;
  // Per accumulated operand: whether the micro part takes a buffer for it as an input that only
  // gives its bytes (micro.outputDonors), so the operand is computed straight into the fold's
  // leaf, not in the arena and copied out. Those inputs follow microInputs' in operand order.
  std::vector<bool> operandIntoLeaf;
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

}  // namespace spmd::runtime
