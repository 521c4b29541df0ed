// The Program contract's catalog, the facts the compiler writes and every runtime layer reads,
// free of MLIR (IREE's compiler and runtime share only such a schema): the ops a Program's steps
// may name, their attributes, and the reduction kinds of the collectives. The blocked layouts are in Layouts.h
// beside it. The dialect mirrors the reductions as an ODS enum (ir/SpmdEnums.td), and
// OpCoverageTest checks that both spell them alike.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "runtime/base/ElementwiseTable.h"

// The ops a Program's steps name, X(name, ...) per op: every kernel table (reference and each
// backend) implements each one; the elementwise ones carry their table row's further fields
// (runtime/base/ElementwiseTable.h). `constant` is absent because constants lower to
// initialized buffers, not steps.
#define SPMD_PROGRAM_OPS(X)                                                                     \
  X(conv2d) X(batch_norm_train) X(batch_norm_infer) X(reduce_window) X(softmax)                 \
  X(log_softmax) X(embedding) X(convert) X(broadcast_in_dim) X(reshape) X(transpose) X(slice)    \
  X(pad) X(concatenate) X(select)                                                                \
  X(reduce_sum) X(reduce_mean) X(reduce_max) X(argmax) X(argsort) X(matmul) X(softmax_cross_entropy)        \
  X(take_along_axis) X(take_along_axis_backward) X(scatter) X(scatter_reduce) X(segment_reduce)   \
  X(conv2d_backward_data) X(conv2d_backward_filter) X(batch_norm_train_backward)                 \
  X(reduce_window_backward) X(embedding_backward)                                                \
  X(softmax_cross_entropy_backward) X(all_reduce) X(all_gather) X(reduce_scatter) X(ppermute)    \
  X(all_to_all)                                                                                  \
  X(axis_index)                                                                                  \
  X(random_uniform) X(random_fold_in) X(relayout) X(fused) X(custom_call) SPMD_ELEMENTWISE_OPS(X)

namespace spmd::runtime {

// Whether `op` is one of SPMD_PROGRAM_OPS.
bool isProgramOp(std::string_view op);

// The attributes a step of each op carries, by name and kind (the dialect's ODS arguments, which
// OpCoverageTest checks this against; `fused` steps get their `body` from lowering). An
// optional one (a flag) reads as false when absent. checkProgram holds every step to it. The
// rows come from the typed attribute records' field lists (runtime/program/OpAttrs.h).
enum class AttrKind { Int, Ints, Real, Flag, Text };
struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required = true;
};
// `op`'s attributes (empty for an op without any, the elementwise ones among them).
std::span<const AttrSpec> programAttributes(std::string_view op);
const char* attrKindName(AttrKind kind);

// How a collective combines the replicas (the `reduction` attribute of all_reduce steps;
// reduce_scatter sums), spelled "sum", "mean", "max", "min"; parseReduction throws naming the
// valid ones on anything else.
enum class Reduction { Sum, Mean, Max, Min };
inline constexpr Reduction kReductions[] = {Reduction::Sum, Reduction::Mean, Reduction::Max, Reduction::Min};
const char* reductionName(Reduction op);
Reduction parseReduction(const std::string& name);

// A ppermute step's `pairs` ([s0, d0, s1, d1, ...]): the replica whose operand `destination`
// receives, or -1 when it is no pair's destination (it receives zeros).
inline int64_t ppermuteSource(std::span<const int64_t> pairs, int64_t destination) {
  for (size_t i = 0; i + 1 < pairs.size(); i += 2)
    if (pairs[i + 1] == destination) return pairs[i];
  return -1;
}

}  // namespace spmd::runtime
