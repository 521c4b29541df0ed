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
// accumulated all-reduces (the optimizer update) in the apply part. An all-reduce operand that
// does not vary (a parameter's psum, a statistic of reduced gradients) is A equal leaves: never
// accumulated, and multiplied by A where the part reducing it adds (a sum; a mean in the apply
// part, whose communicators divide by every leaf), so that it counts once per virtual replica.
#pragma once

#include <string>
#include <vector>

#include "runtime/program/Accumulation.h"

namespace spmd {

using runtime::AccumulationSplit;

// `program` has a call contract (which inputs and outputs are mapped over the axis);
// `outputNames[k]` names output k in errors. Throws spmd::Error when a replicated output differs
// between replicas (it varies with the batch and reaches no all-reduce).
AccumulationSplit splitForAccumulation(const runtime::Program& program, const std::vector<std::string>& outputNames);

}  // namespace spmd
