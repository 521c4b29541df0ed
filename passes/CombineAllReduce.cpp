// spmd-combine-all-reduce: the gradient all_reduces of a step become one (or a few bucketed)
// all_reduce ops over many operands, which the runtime reduces as one flat buffer, each placed
// right after its last operand so that it overlaps the rest of the backward pass.
#include <map>
#include <tuple>
#include <vector>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "passes/Buckets.h"
#include "passes/Passes.h"

namespace spmd::passes {

#define GEN_PASS_DEF_COMBINEALLREDUCE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

class Combiner {
 public:
  Combiner(Block& block, int64_t bucketBytes) : block_(block), bucketBytes_(bucketBytes), at_(block) {}

  void run() {
    // Candidates by (axis, reduction, element type, replica groups), in the order their operands
    // are ready.
    using Key = std::tuple<std::string, std::string, std::string, std::vector<int64_t>>;
    std::map<Key, SmallVector<ir::AllReduceOp>> groups;
    for (Operation& op : block_) {
      auto reduce = llvm::dyn_cast<ir::AllReduceOp>(op);
      // An all_reduce of an all_reduce stays as written (its anchor would be combined away).
      if (!reduce || llvm::any_of(reduce.getInputs(), [](Value v) {
            return v.getDefiningOp<ir::AllReduceOp>() != nullptr;
          }))
        continue;
      std::string type;
      llvm::raw_string_ostream(type) << llvm::cast<RankedTensorType>(
          reduce.getInputs()[0].getType()).getElementType();
      std::vector<int64_t> replicaGroups;
      if (auto within = reduce.getReplicaGroups()) replicaGroups.assign(within->begin(), within->end());
      groups[{reduce.getAxisName().str(), ir::stringifyReduction(reduce.getReduction()).str(), type, replicaGroups}]
          .push_back(reduce);
    }
    // The combined op sits right after the last operand of any member, so it fits only while
    // every member's first use comes after that point.
    for (auto& [key, ops] : groups)
      formBuckets(ops, at_, bucketBytes_, [](ir::AllReduceOp op) {
        int64_t size = 0;
        for (Value v : op.getInputs()) size += bytesOf(v);
        return size;
      }, [&](const Bucket<ir::AllReduceOp>& bucket) { emit(bucket); });
  }

 private:
  // The bucket's all_reduce goes right after `point`, so that it can start (in the background,
  // behind the rest of the backward pass) as soon as its last gradient exists; a bucket of one
  // is moved there too, not left where spmd-insert-pmean put it (at the end of the step).
  void emit(const Bucket<ir::AllReduceOp>& bucket) {
    if (bucket.ops.size() == 1) {
      Operation* op = bucket.ops.front();
      if (bucket.point < 0)
        op->moveBefore(&block_.front());
      else
        op->moveAfter(at_.at(bucket.point));
      return;
    }
    SmallVector<Value> inputs;
    for (ir::AllReduceOp op : bucket.ops) inputs.append(op.getInputs().begin(), op.getInputs().end());
    OpBuilder b(block_.getParentOp()->getContext());
    if (bucket.point < 0)
      b.setInsertionPointToStart(&block_);
    else
      b.setInsertionPointAfter(at_.at(bucket.point));
    ir::AllReduceOp last = bucket.ops.back(), first = bucket.ops.front();
    auto combined = b.create<ir::AllReduceOp>(last.getLoc(), inputs, first.getAxisName(), first.getReduction(),
                                              first.getReplicaGroupsAttr(), first.getGroupSizeAttr());
    unsigned next = 0;
    for (ir::AllReduceOp op : bucket.ops) {
      for (Value result : op.getResults()) result.replaceAllUsesWith(combined.getResult(next++));
      op->erase();
    }
  }

  Block& block_;
  int64_t bucketBytes_;
  BlockPositions at_;  // of the ops before combining
};

struct CombineAllReducePass : impl::CombineAllReduceBase<CombineAllReducePass> {
  using CombineAllReduceBase::CombineAllReduceBase;
  void runOnOperation() override {
    if (bucketBytes < 1) {  // a pass option is user input (spmd-opt's command line, PmapOptions)
      getOperation()->emitError() << "spmd-combine-all-reduce: bucket-bytes is " << int64_t(bucketBytes)
                                  << "; give a positive number of bytes (the largest combined all_reduce)";
      return signalPassFailure();
    }
    getOperation()->walk([&](FunctionOpInterface function) {
      if (!function.isExternal()) Combiner(function.getFunctionBody().front(), bucketBytes).run();
    });
  }
};

}  // namespace
}  // namespace spmd::passes
