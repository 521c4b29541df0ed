// Bucketing of collectives shared by spmd-combine-all-reduce and spmd-combine-sharded-collectives:
// positions of ops in one block, and the grouping of collectives, in the order their operands are
// ready, into buckets that fit a byte limit and that can sit right after their last operand.
#pragma once

#include <algorithm>
#include <climits>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/BuiltinTypes.h"

namespace spmd::passes {

inline int64_t bytesOf(mlir::Value v) {
  auto type = llvm::cast<mlir::RankedTensorType>(v.getType());
  return type.getNumElements() * std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
}

// Where each op of a block stood before any was moved.
class BlockPositions {
 public:
  explicit BlockPositions(mlir::Block& block) : block_(block) {
    for (mlir::Operation& op : block) {
      position_[&op] = int(ops_.size());
      ops_.push_back(&op);
    }
  }
  int of(mlir::Operation* op) const { return position_.lookup(op); }
  mlir::Operation* at(int position) const { return ops_[size_t(position)]; }
  // The last op defining an operand of `op` (-1: block arguments only).
  int ready(mlir::Operation* op) const {
    int last = -1;
    for (mlir::Value v : op->getOperands())
      if (mlir::Operation* def = v.getDefiningOp())
        if (mlir::Operation* top = block_.findAncestorOpInBlock(*def)) last = std::max(last, of(top));
    return last;
  }
  // The first op using a result of `op` (INT_MAX: none).
  int firstUse(mlir::Operation* op) const {
    int first = INT_MAX;
    for (mlir::Operation* user : op->getUsers())
      if (mlir::Operation* top = block_.findAncestorOpInBlock(*user)) first = std::min(first, of(top));
    return first;
  }

 private:
  mlir::Block& block_;
  llvm::DenseMap<mlir::Operation*, int> position_;
  std::vector<mlir::Operation*> ops_;
};

template <typename Op>
struct Bucket {
  llvm::SmallVector<Op> ops;
  int64_t bytes = 0;
  int point = -1, firstUse = INT_MAX;  // where it goes (after its last operand); its first use
};

// `ops` sorted by when their operands are ready, then cut into buckets of at most `limit` bytes
// (`size(op)`); an op joins a bucket only while every member's first use comes after the point
// the bucket would sit at. `emit(bucket)` for each, in order.
template <typename Op, typename Size, typename Emit>
void formBuckets(llvm::SmallVector<Op>& ops, const BlockPositions& at, int64_t limit, Size size, Emit emit) {
  llvm::stable_sort(ops, [&](Op a, Op b) {
    return std::pair(at.ready(a), at.of(a)) < std::pair(at.ready(b), at.of(b));
  });
  Bucket<Op> bucket;
  for (Op op : ops) {
    const int64_t bytes = size(op);
    int point = std::max(bucket.point, at.ready(op));
    int first = std::min(bucket.firstUse, at.firstUse(op));
    if (!bucket.ops.empty() && (bucket.bytes + bytes > limit || first <= point)) {
      emit(bucket);
      bucket = Bucket<Op>();
      point = at.ready(op);
      first = at.firstUse(op);
    }
    bucket.ops.push_back(op);
    bucket.bytes += bytes;
    bucket.point = point;
    bucket.firstUse = first;
  }
  emit(bucket);
}

}  // namespace spmd::passes
