// Gradient accumulation's split of a lowered step (PmapOptions::accumulate): the part that runs
// once per micro-batch and the part that runs once per step. Each replica runs the micro part on
// its A micro-batches in turn (virtual replicas replica * A + a), reduces each accumulated
// all-reduce's operand over them with the fold tree (runtime/device/Fold.h) as it goes, and then
// runs the apply part, whose all-reduces fold those subtrees over every replica: the same tree,
// so the same bits, as P * K * A replicas without accumulation.
//
// A step's data-dependent values ("varying": from mapped inputs and axis_index) belong to the
// micro part. An all-reduce of varying values whose result only feeds the rest of the step (the
// gradients' pmean, the loss's, the BatchNorm statistics') is accumulated: its operands are the
// micro part's outputs and the apply part's inputs. An all-reduce whose result feeds varying
// work again (cross-replica BatchNorm in the forward pass) stays in the micro part and reduces
// over the replicas of one micro-batch; a replicated output computed from it (cross-replica
// BatchNorm's running statistics) gets an all-reduce of its own, accumulated: its mean over the
// micro-batches. Replicated work that varying work needs (weight
// reorders) runs in the micro part, repeated per micro-batch; replicated work after the
// accumulated all-reduces (the optimizer update) in the apply part.
#pragma once

#include <string>
#include <vector>

#include "runtime/program/Program.h"

namespace spmd {

struct AccumulationSplit {
  runtime::Program micro, apply;
  // Original program input index of each micro / apply input; -1 for the apply part's leading
  // inputs, the accumulated operands (apply.inputs[j] for j < accumulated is micro output
  // microMapped + j, summed over the micro-batches).
  std::vector<int> microInputs, applyInputs;
  int accumulated = 0, microMapped = 0;
  // Where each original output comes from: micro output (a mapped output: the micro-batches'
  // parts one after another) or apply output.
  struct Source {
    bool micro = false;
    int index = 0;
  };
  std::vector<Source> outputs;
};

// `mappedInputs[i]` / `mappedOutputs[k]`: whether input i / output k is mapped over the axis
// (split or stacked); `outputNames[k]` names output k in errors. Throws spmd::Error when a
// replicated output differs between replicas (it varies with the batch and reaches no all-reduce).
AccumulationSplit splitForAccumulation(const runtime::Program& program, const std::vector<bool>& mappedInputs,
                                       const std::vector<bool>& mappedOutputs,
                                       const std::vector<std::string>& outputNames);

}  // namespace spmd
