// The replicated call with gradient accumulation (PmapOptions::accumulate = A): each replica runs
// the micro part (runtime/program/Accumulation.h) on its A micro-batches in rounds of one or more
// at once, as virtual replicas replica * A + a, folding each accumulated operand over them in
// micro-batch order with the fold tree's own nodes (runtime/device/Fold.h: log2(A) + 1 buffers
// at most, and a leaf more for each micro-batch running beside another), and then the apply
// part once on the folded subtrees, whose all-reduces fold them over every replica: the same
// tree, so the same bits, as A times the replicas without accumulation. Arguments, donation
// and outputs as in callReplicated (runtime/exec/ReplicatedCall.h), by the whole step's contract.
#pragma once

#include "runtime/exec/ReplicatedCall.h"
#include "runtime/program/Accumulation.h"

namespace spmd::runtime {

// The fold's buffers, kept from one call of a step to the next (per replica and accumulated
// operand, at most log2(A) + 1 each: what the fold holds at its deepest): the operands' kernels
// then write pages already mapped (fresh buffers, faulted in by the kernels, made the full-width
// ResNet-18 step on cpu:1 with 4 micro-batches 5% slower).
struct FoldBuffers {
  std::vector<std::vector<std::vector<std::shared_ptr<std::byte>>>> spare;  // [replica][operand]
  bool warmed = false;  // a call has run (its kernels chose): micro-batches may run at once
};

// `micro` runs split.micro with microBatches micro-batches per replica, `apply` split.apply;
// all on the same devices. A mapped argument holds microBatches micro-batches' rows per replica.
// Each group of `micro` runs one micro-batch of a round at once (one group: one after another;
// PmapOptions::microBatchesAtOnce). `kept`: the step's fold buffers between calls (null:
// allocated for this call, and the micro-batches run one at a time).
std::vector<std::shared_ptr<DeviceArray>> callAccumulated(const AccumulationSplit& split, int microBatches,
                                                          const std::vector<ReplicaGroup*>& micro, ReplicaGroup& apply,
                                                          const std::vector<CallArgument>& arguments,
                                                          const CallLayout& layout, CallCounts* counts = nullptr,
                                                          FoldBuffers* kept = nullptr);

}  // namespace spmd::runtime
