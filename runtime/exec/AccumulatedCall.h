// The replicated call with gradient accumulation (PmapOptions::accumulate = A): each replica runs
// the micro part (runtime/program/Accumulation.h) on its A micro-batches in turn, as virtual
// replicas replica * A + a, folding each accumulated operand over them with the fold tree's own
// nodes as they arrive (runtime/device/Fold.h: log2(A) + 1 buffers at most), and then the apply
// part once on the folded subtrees, whose all-reduces fold them over every replica: the same
// tree, so the same bits, as A times the replicas without accumulation. Arguments, donation
// and outputs as in callReplicated (runtime/exec/ReplicatedCall.h), by the whole step's contract.
#pragma once

#include "runtime/exec/ReplicatedCall.h"
#include "runtime/program/Accumulation.h"

namespace spmd::runtime {

// `micro` runs split.micro with microBatches micro-batches per replica, `apply` split.apply;
// both on the same devices. A mapped argument holds microBatches micro-batches' rows per replica.
std::vector<std::shared_ptr<DeviceArray>> callAccumulated(const AccumulationSplit& split, int microBatches,
                                                          ReplicaGroup& micro, ReplicaGroup& apply,
                                                          const std::vector<CallArgument>& arguments,
                                                          const CallLayout& layout, CallCounts* counts = nullptr);

}  // namespace spmd::runtime
