// spmd-combine-sharded-collectives: the per-tensor collectives of ZeRO-1 and FSDP in buckets, as
// spmd-combine-all-reduce buckets the replicated step's all_reduces. Runs after spmd-shard-update
// (and spmd-gather-at-use), which leave one reduce_scatter per gradient and one all_gather per
// sliced parameter (and per reader, with FSDP): a step of ResNet-18 makes ~150 collectives, and
// each costs a meeting of the replicas (or a message between processes) however small it is.
//   - reduce_scatters of [N, c] rows (one axis, reduction, element type and N) are grouped in
//     the order their operands are produced into buckets of at most bucket-bytes; a bucket
//     becomes concatenate(rows..., axis 1) -> one reduce_scatter -> a slice per member, placed
//     right after its last operand (so it still runs behind the rest of the backward pass), and
//     only while no member's result is used before that point;
//   - all_gathers of sliced function arguments that follow one another (with the reshapes and
//     slices that rebuild each whole tensor between them: ZeRO-1's at the top of the step, FSDP's
//     before each reader) become concatenate(slices...) -> one all_gather -> a column slice per
//     member, where the first of them was, so FSDP still gathers a layer right before it runs;
//     with `prefetch`, one layer earlier: where the previous reader's rebuilding starts.
// Every element is folded (or copied) as before, so the results are the same bits.
#include <map>
#include <tuple>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "passes/Buckets.h"
#include "passes/Passes.h"

namespace spmd::passes {

#define GEN_PASS_DEF_COMBINESHARDEDCOLLECTIVES
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

std::string typeText(Type t) {
  std::string text;
  llvm::raw_string_ostream(text) << t;
  return text;
}

Location bucketLoc(Operation* last, const char* what) {
  return NameLoc::get(StringAttr::get(last->getContext(), what), last->getLoc());
}

class Combiner {
 public:
  Combiner(func::FuncOp function, int64_t bucketBytes, bool prefetch)
      : function_(function), block_(function.getBody().front()), bucketBytes_(bucketBytes), prefetch_(prefetch),
        at_(block_) {}

  void run() {
    combineScatters();
    combineGathers();
  }

 private:
  // --- reduce_scatter ------------------------------------------------------------------------

  void combineScatters() {
    using Key = std::tuple<std::string, std::string, std::string, int64_t>;
    std::map<Key, SmallVector<ir::ReduceScatterOp>> groups;
    for (Operation& op : block_)
      if (auto scatter = llvm::dyn_cast<ir::ReduceScatterOp>(op);
          scatter && !scatter.getReplicaGroups() && typeOf(scatter.getInput()).getRank() == 2) {
        auto type = typeOf(scatter.getInput());
        groups[{scatter.getAxisName().str(), ir::stringifyReduction(scatter.getReduction()).str(),
                typeText(type.getElementType()), type.getDimSize(0)}]
            .push_back(scatter);
      }
    for (auto& [key, ops] : groups)
      formBuckets(ops, at_, bucketBytes_, [](ir::ReduceScatterOp op) { return bytesOf(op.getInput()); },
                  [&](Bucket<ir::ReduceScatterOp>& bucket) { emit(bucket); });
  }

  // rows [N, c_i] -> [N, sum c_i] -> reduce_scatter -> [sum c_i] -> each member's [c_i].
  void emit(Bucket<ir::ReduceScatterOp>& bucket) {
    if (bucket.ops.size() < 2) return;  // left where spmd-shard-update placed it
    OpBuilder b(function_.getContext());
    if (bucket.point < 0)
      b.setInsertionPointToStart(&block_);
    else
      b.setInsertionPointAfter(at_.at(bucket.point));
    ir::ReduceScatterOp first = bucket.ops.front();
    Location loc = bucketLoc(bucket.ops.back(), "reduce-scatters in one bucket (ZeRO-1 / FSDP)");
    SmallVector<Value> rows;
    for (ir::ReduceScatterOp op : bucket.ops) rows.push_back(op.getInput());
    Value joined = b.create<ir::ConcatenateOp>(loc, rows, uint64_t{1});
    Value scattered = b.create<ir::ReduceScatterOp>(loc, joined, first.getAxisName(), first.getReduction());
    int64_t offset = 0;
    SmallVector<Value> parts;  // all made before any member goes: one may be the insertion point
    for (ir::ReduceScatterOp op : bucket.ops) {
      const int64_t width = typeOf(op.getResult()).getDimSize(0);
      parts.push_back(b.create<ir::SliceOp>(loc, scattered, SmallVector<int64_t>{offset},
                                            SmallVector<int64_t>{offset + width}));
      offset += width;
    }
    for (auto [op, part] : llvm::zip(bucket.ops, parts)) {
      op.getResult().replaceAllUsesWith(part);
      op->erase();
    }
  }

  // --- all_gather ----------------------------------------------------------------------------

  // An all_gather of a sliced function argument (spmd-shard-update's), keyed by what it must
  // share with a bucket's other members.
  std::optional<std::tuple<std::string, int64_t, std::string>> gatherKey(Operation* op) {
    auto gather = llvm::dyn_cast<ir::AllGatherOp>(op);
    if (!gather) return std::nullopt;
    auto arg = llvm::dyn_cast<BlockArgument>(gather.getInput());
    if (!arg || arg.getOwner() != &block_ || !function_.getArgAttr(arg.getArgNumber(), ir::kShardOfAttr) ||
        typeOf(arg).getRank() != 1)
      return std::nullopt;
    return std::tuple{gather.getAxisName().str(), int64_t(gather.getAxisSize()), typeText(typeOf(arg).getElementType())};
  }

  void combineGathers() {
    // Runs of consecutive gathers; the reshapes and slices rebuilding their tensors do not end a run.
    SmallVector<SmallVector<ir::AllGatherOp>> runs(1);
    llvm::DenseSet<Value> rebuilt;  // results of the current run's gathers and of their rebuilding
    std::optional<std::tuple<std::string, int64_t, std::string>> runKey;
    for (Operation& op : block_) {
      if (auto key = gatherKey(&op)) {
        if (runKey && *key != *runKey) runs.emplace_back(), rebuilt.clear();
        runKey = key;
        runs.back().push_back(llvm::cast<ir::AllGatherOp>(op));
        rebuilt.insert(op.getResult(0));
        continue;
      }
      if (llvm::isa<ir::ReshapeOp, ir::SliceOp>(op) && rebuilt.contains(op.getOperand(0))) {
        rebuilt.insert(op.getResult(0));
        continue;
      }
      if (!runs.back().empty()) runs.emplace_back();
      rebuilt.clear();
      runKey.reset();
    }
    // Per run, after bucketing: the ops that gather (each bucket's concatenate and all_gather),
    // and the op after the last of them, where the run's rebuilding starts.
    SmallVector<SmallVector<Operation*>> issued;
    SmallVector<Operation*> anchors;
    for (auto& run : runs) {
      if (run.empty()) continue;
      SmallVector<Operation*> ops;
      SmallVector<ir::AllGatherOp> bucket;
      int64_t bytes = 0;
      for (ir::AllGatherOp op : run) {
        const int64_t size = bytesOf(op.getResult());
        if (!bucket.empty() && bytes + size > bucketBytes_) emitGathers(bucket, ops), bucket.clear(), bytes = 0;
        bucket.push_back(op);
        bytes += size;
      }
      emitGathers(bucket, ops);
      anchors.push_back(ops.back()->getNextNode());
      issued.push_back(std::move(ops));
    }
    // Prefetch: each run's gathers move to where the run before it starts rebuilding, so they are
    // issued one reader (one layer) ahead and a communicator with a thread of its own gathers
    // behind that layer's work; their results are live for that layer too.
    if (prefetch_)
      for (size_t k = 1; k < issued.size(); ++k)
        for (Operation* op : issued[k]) op->moveBefore(anchors[k - 1]);
  }

  // slices [c_i] -> [sum c_i] -> all_gather -> [N, sum c_i] -> each member's [N, c_i], where the
  // first member was.
  void emitGathers(SmallVector<ir::AllGatherOp>& bucket, SmallVector<Operation*>& issued) {
    if (bucket.empty()) return;
    if (bucket.size() < 2) {
      issued.push_back(bucket.front());
      return;
    }
    OpBuilder b(function_.getContext());
    b.setInsertionPoint(bucket.front());
    Location loc = bucketLoc(bucket.front(), "all-gathers in one bucket (ZeRO-1 / FSDP)");
    SmallVector<Value> slices;
    for (ir::AllGatherOp op : bucket) slices.push_back(op.getInput());
    Value joined = b.create<ir::ConcatenateOp>(loc, slices, uint64_t{0});
    const int64_t n = int64_t(bucket.front().getAxisSize());
    Value gathered = b.create<ir::AllGatherOp>(loc, joined, bucket.front().getAxisName(), n);
    issued.append({joined.getDefiningOp(), gathered.getDefiningOp()});
    int64_t offset = 0;
    SmallVector<Value> parts;  // all made before any member goes: the builder inserts before the first
    for (ir::AllGatherOp op : bucket) {
      const int64_t width = typeOf(op.getInput()).getDimSize(0);
      parts.push_back(b.create<ir::SliceOp>(loc, gathered, SmallVector<int64_t>{0, offset},
                                            SmallVector<int64_t>{n, offset + width}));
      offset += width;
    }
    for (auto [op, part] : llvm::zip(bucket, parts)) {
      op.getResult().replaceAllUsesWith(part);
      op->erase();
    }
  }

  func::FuncOp function_;
  Block& block_;
  int64_t bucketBytes_;
  bool prefetch_;
  BlockPositions at_;  // of the ops before combining
};

struct CombineShardedCollectivesPass : impl::CombineShardedCollectivesBase<CombineShardedCollectivesPass> {
  using CombineShardedCollectivesBase::CombineShardedCollectivesBase;
  void runOnOperation() override {
    if (bucketBytes < 1) {  // a pass option is user input (spmd-opt's command line, PmapOptions)
      getOperation()->emitError() << "spmd-combine-sharded-collectives: bucket-bytes is " << int64_t(bucketBytes)
                                  << "; give a positive number of bytes (the largest combined collective)";
      return signalPassFailure();
    }
    getOperation()->walk([&](func::FuncOp function) {
      if (!function.getBody().empty()) Combiner(function, bucketBytes, prefetch).run();
    });
  }
};

}  // namespace
}  // namespace spmd::passes
