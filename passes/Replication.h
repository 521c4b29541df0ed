// The replication analysis (shard_map's model): inside a function mapped over an axis, every
// value is either invariant (the same on every replica) or varying. Mapped arguments vary;
// all_reduce and all_gather results are invariant; axis_index, reduce_scatter, ppermute and
// all_to_all vary; any other op varies when an operand does. A value_and_grad's yields follow its body, and its gradients
// vary when anything in the body does (the derivative then depends on per-replica data).
#pragma once

#include "ir/SpmdAttributes.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace spmd::passes {

// The attributes it reads and sets (ir/SpmdAttributes.h).
using ir::kAxisNameAttr;
using ir::kAxisSizeAttr;
using ir::kMappedAttr;
using ir::kNameAttr;
using ir::kVaryingAttr;

class ReplicationAnalysis {
 public:
  explicit ReplicationAnalysis(mlir::FunctionOpInterface function);
  bool isVarying(mlir::Value value) const { return varying_.contains(value); }
  // Marks each op with a varying result `spmd.varying` (and clears stale marks).
  void annotate(mlir::FunctionOpInterface function) const;

 private:
  void visitBlock(mlir::Block& block);
  void visit(mlir::Operation* op);
  llvm::DenseSet<mlir::Value> varying_;
};

// The axis a function is mapped over, or an empty string when it is not mapped.
llvm::StringRef mappedAxis(mlir::FunctionOpInterface function);

}  // namespace spmd::passes
