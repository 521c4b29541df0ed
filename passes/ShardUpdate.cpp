// spmd-shard-update (ZeRO-1): the optimizer's elementwise update runs on each replica's 1/N
// slice. The region is every invariant elementwise op reachable from an averaged gradient (a
// mean or sum all_reduce of a varying tensor) through ops of its type, plus the invariant
// elementwise ops of that type feeding it (weight decay's p * wd). Each region op is cloned
// onto tensor<chunk> (chunk = ceil(numel / N); the flat tensor padded with zeros to N * chunk,
// replica r holding elements [r * chunk, (r + 1) * chunk)):
//   - the gradient's all_reduce becomes a reduce_scatter of the padded [N, chunk] gradient with
//     its reduction (a mean divides its fold's root by the replicas the job runs, as the
//     all_reduce does: the same bits, and no divisor written into the program);
//   - a replicated argument the region reads (parameters, momentum, Adam's moments, an EMA) is
//     passed as this replica's slice (spmd.mapped + spmd.shard_of = its full type); where the
//     rest of the step reads it (the forward pass reads the parameters) an all_gather rebuilds it;
//   - splat constants and broadcast scalars (a schedule's learning rate) are rebuilt at the
//     slice's shape; any other invariant operand is sliced locally at axis_index (of_device
//     with accumulation);
//   - a returned region value (the new parameters and state) is returned as the slice
//     (spmd.mapped + spmd.shard_of), so state stays sharded between steps.
// With gradient accumulation (spmd.micro_batches = A) the slices are cut over the axis' devices
// (axis_size / A), not its replicas: each device's A micro-batches share one slice, and the
// reduce_scatter (accumulated over the micro-batches by the runtime, as an all_reduce is) and the
// all_gathers span the devices.
// The original ops stay where something outside the region still reads them (computing the full
// value from the gathered arguments) and are erased otherwise. Every region op is elementwise and
// the reduce_scatter folds each element as the all_reduce did, so the result is bitwise the
// replicated update's.
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "passes/Passes.h"
#include "passes/Replication.h"

namespace spmd::passes {

#define GEN_PASS_DEF_SHARDUPDATE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

class Sharder {
 public:
  explicit Sharder(func::FuncOp function)
      : function_(function), block_(function.getBody().front()), axis_(mappedAxis(function).str()),
        replicas_(function->getAttrOfType<IntegerAttr>(kAxisSizeAttr).getInt()), analysis_(function) {
    if (auto micro = function->getAttrOfType<IntegerAttr>(ir::kMicroBatchesAttr); micro && micro.getInt() > 1)
      microBatches_ = micro.getInt(), replicas_ /= microBatches_;
    int position = 0;
    for (Operation& op : block_) position_[&op] = position++;
  }

  void run() {
    if (replicas_ < 2) return;
    findRegion();
    if (region_.empty()) return;
    OpBuilder b(function_.getContext());
    // Clones in block order: every operand's slice is made right after its full value.
    SmallVector<Operation*> ordered(region_.begin(), region_.end());
    llvm::sort(ordered, [&](Operation* x, Operation* y) { return position_[x] < position_[y]; });
    // A slice is needed where a sliced op reads it or the function returns it; ops kept whole
    // that nothing sliced reads (cross-replica BatchNorm's statistics) get no clone.
    llvm::DenseSet<Operation*> needed;
    for (Operation* op : llvm::reverse(ordered))
      if (!keepsFull_.contains(op) || llvm::any_of(op->getUsers(), [&](Operation* u) {
            return needed.contains(u) || llvm::isa<func::ReturnOp>(u);
          }))
        needed.insert(op);
    for (Operation* op : ordered) {
      if (!needed.contains(op)) continue;
      for (Value operand : op->getOperands()) sliceOf(operand);
      b.setInsertionPointAfter(op);
      Operation* clone = b.clone(*op, slices_);
      clone->getResult(0).setType(chunkType(typeOf(op->getResult(0))));
      slices_.map(op->getResult(0), clone->getResult(0));
      clones_.push_back(clone);
    }
    // Returned region values leave as this replica's slice.
    auto ret = llvm::cast<func::ReturnOp>(block_.getTerminator());
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value value = ret.getOperand(i);
      Operation* def = value.getDefiningOp();
      if (!def || !region_.contains(def)) continue;
      ret.setOperand(i, slices_.lookup(value));
      function_.setResultAttr(i, kMappedAttr, UnitAttr::get(function_.getContext()));
      function_.setResultAttr(i, ir::kShardOfAttr, TypeAttr::get(value.getType()));
    }
    eraseDead();
    function_.setType(FunctionType::get(function_.getContext(), block_.getArgumentTypes(), ret.getOperandTypes()));
  }

 private:
  bool invariantElementwise(Operation* op, RankedTensorType type) {
    return op && ir::isElementwise(op) && op->getNumResults() == 1 && op->getNumRegions() == 0 &&
           op->getBlock() == &block_ && op->getResult(0).getType() == type && !analysis_.isVarying(op->getResult(0));
  }

  // A mean or sum all_reduce of one varying float tensor: an averaged (or summed) gradient.
  bool isSeed(Operation* op) {
    auto reduce = llvm::dyn_cast<ir::AllReduceOp>(op);
    if (!reduce || reduce.getInputs().size() != 1 || reduce.getAxisName() != axis_ || reduce.getReplicaGroups())
      return false;
    if (reduce.getReduction() != ir::Reduction::Mean && reduce.getReduction() != ir::Reduction::Sum) return false;
    auto type = typeOf(reduce.getInputs()[0]);
    return type.getRank() > 0 && llvm::isa<FloatType>(type.getElementType()) &&
           analysis_.isVarying(reduce.getInputs()[0]);
  }

  void findRegion() {
    SmallVector<Value> worklist;
    for (Operation& op : block_)
      if (isSeed(&op)) worklist.push_back(op.getResult(0));
    // Forward: every invariant elementwise op of the gradient's type that reads the region.
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      for (Operation* user : value.getUsers())
        if (invariantElementwise(user, typeOf(value)) && region_.insert(user))
          worklist.push_back(user->getResult(0));
    }
    // Backward: invariant elementwise ops of the same type that only the region's inputs feed
    // (p * wd) run on the slice too, instead of on the full tensor and then being sliced.
    for (size_t i = 0; i < region_.size(); ++i)
      for (Value operand : region_[i]->getOperands()) {
        Operation* def = operand.getDefiningOp();
        if (invariantElementwise(def, typeOf(operand)) && !region_.contains(def)) region_.insert(def);
      }
    // Region ops something outside the region reads (g * g for a global norm) keep their full
    // computation, and so do the region ops and gradients they read.
    SmallVector<Operation*> full;
    for (Operation* op : region_)
      if (llvm::any_of(op->getUsers(), [&](Operation* u) { return !region_.contains(u) && !llvm::isa<func::ReturnOp>(u); }))
        full.push_back(op);
    while (!full.empty()) {
      Operation* op = full.pop_back_val();
      if (!keepsFull_.insert(op).second) continue;
      for (Value operand : op->getOperands())
        if (Operation* def = operand.getDefiningOp(); def && region_.contains(def)) full.push_back(def);
    }
  }

  RankedTensorType chunkType(RankedTensorType full) const {
    return RankedTensorType::get({chunk(full)}, full.getElementType());
  }
  int64_t chunk(RankedTensorType full) const { return (full.getNumElements() + replicas_ - 1) / replicas_; }

  Location generated(Location at) {
    return NameLoc::get(StringAttr::get(function_.getContext(), "sharded update (ZeRO-1)"), at);
  }

  // [shape] -> [N, chunk]: flattened and padded with zeros (a reshape copies: one where the
  // elements split evenly).
  Value rowsOf(OpBuilder& b, Location loc, Value full) {
    auto type = typeOf(full);
    const int64_t n = type.getNumElements(), c = chunk(type);
    auto rows = RankedTensorType::get({replicas_, c}, type.getElementType());
    if (c * replicas_ == n) return b.create<ir::ReshapeOp>(loc, rows, full);
    Value flat = type.getRank() == 1 ? full
                                     : b.create<ir::ReshapeOp>(loc, RankedTensorType::get({n}, type.getElementType()), full);
    flat = b.create<ir::PadOp>(loc, flat, SmallVector<int64_t>{0}, SmallVector<int64_t>{c * replicas_ - n});
    return b.create<ir::ReshapeOp>(loc, rows, flat);
  }

  // This replica's slice of `full`, for every kind of region input; memoized in slices_.
  Value sliceOf(Value full) {
    if (Value known = slices_.lookupOrNull(full)) return known;
    OpBuilder b(function_.getContext());
    auto type = typeOf(full);
    Location loc = generated(full.getLoc());
    Value slice;
    if (auto arg = llvm::dyn_cast<BlockArgument>(full); arg && arg.getOwner() == &block_ &&
                                                       !function_.getArgAttr(arg.getArgNumber(), kMappedAttr)) {
      slice = shardArgument(b, arg);
    } else if (Operation* def = full.getDefiningOp(); def && isSeed(def) && onlyRegionUses(full)) {
      // Right after the gradient is computed, so that it can run behind the rest of the
      // backward pass (as spmd-combine-all-reduce places the all_reduce); the mean where it was.
      auto reduce = llvm::cast<ir::AllReduceOp>(def);
      Value gradient = reduce.getInputs()[0];
      if (Operation* producer = gradient.getDefiningOp()) b.setInsertionPointAfter(producer);
      else b.setInsertionPointToStart(&block_);
      // A mean stays a mean: the runtime divides by the replicas it runs (no divisor in the program).
      slice = b.create<ir::ReduceScatterOp>(loc, rowsOf(b, loc, gradient), axis_, reduce.getReduction());
      b.setInsertionPointAfter(def);
      seeds_.insert(def);
    } else if (auto constant = full.getDefiningOp<ir::ConstantOp>(); constant && splatOf(constant)) {
      b.setInsertionPointAfter(constant);
      slice = b.create<ir::ConstantOp>(loc, splatOf(constant).resizeSplat(chunkType(type)));
      rebuilt_.push_back(constant);
    } else if (auto broadcast = full.getDefiningOp<ir::BroadcastInDimOp>();
               broadcast && typeOf(broadcast.getInput()).getRank() == 0) {
      b.setInsertionPointAfter(broadcast);
      slice = b.create<ir::BroadcastInDimOp>(loc, chunkType(type), broadcast.getInput(), ArrayRef<int64_t>{});
      rebuilt_.push_back(broadcast);
    } else {  // any other invariant value: the full tensor, sliced at this replica's index
      if (Operation* def = full.getDefiningOp()) b.setInsertionPointAfter(def);
      else b.setInsertionPointToStart(&block_);
      Value rows = rowsOf(b, loc, full);
      // With accumulation the slice is the device's, whichever of its micro-batches runs.
      auto index = b.create<ir::AxisIndexOp>(loc, RankedTensorType::get({}, b.getI32Type()), axis_);
      if (microBatches_ > 1) index.setOfDevice(true);
      Value ids = b.create<ir::ReshapeOp>(loc, RankedTensorType::get({1}, b.getI32Type()), index);
      Value row = b.create<ir::EmbeddingOp>(loc, rows, ids);
      slice = b.create<ir::ReshapeOp>(loc, chunkType(type), row);
    }
    slices_.map(full, slice);
    return slice;
  }

  static DenseElementsAttr splatOf(ir::ConstantOp constant) {
    auto dense = llvm::dyn_cast<DenseElementsAttr>(constant.getValue());
    return dense && dense.isSplat() ? dense : nullptr;
  }

  // Only region ops read `value`, and none of them must stay whole.
  bool onlyRegionUses(Value value) {
    return llvm::all_of(value.getUsers(),
                        [&](Operation* user) { return region_.contains(user) && !keepsFull_.contains(user); });
  }

  // The argument becomes this replica's slice; what outside the region reads it gets the whole
  // tensor back from an all_gather at the top of the function.
  Value shardArgument(OpBuilder& b, BlockArgument arg) {
    auto full = typeOf(arg);
    b.setInsertionPointToStart(&block_);
    Location loc = generated(function_.getLoc());
    const int64_t c = chunk(full);
    arg.setType(chunkType(full));  // its users are moved to `whole` below
    Value gathered = b.create<ir::AllGatherOp>(loc, arg, axis_, replicas_);
    Value whole;
    if (replicas_ * c == full.getNumElements()) {
      whole = b.create<ir::ReshapeOp>(loc, full, gathered);
    } else {
      Value flat = b.create<ir::ReshapeOp>(loc, RankedTensorType::get({replicas_ * c}, full.getElementType()), gathered);
      flat = b.create<ir::SliceOp>(loc, flat, SmallVector<int64_t>{0}, SmallVector<int64_t>{full.getNumElements()});
      whole = flat.getType() == full ? flat : b.create<ir::ReshapeOp>(loc, full, flat).getResult();
    }
    arg.replaceAllUsesExcept(whole, gathered.getDefiningOp());
    function_.setArgAttr(arg.getArgNumber(), kMappedAttr, UnitAttr::get(function_.getContext()));
    function_.setArgAttr(arg.getArgNumber(), ir::kShardOfAttr, TypeAttr::get(full));
    gathers_.push_back(whole.getDefiningOp());
    slices_.map(whole, arg);  // region ops now read `whole`: their clones read the slice
    return arg;
  }

  // The full computation stays only where something outside the region reads it.
  void eraseDead() {
    for (Operation* clone : llvm::reverse(clones_))  // slices of values only kept whole
      if (clone->use_empty()) clone->erase();
    SmallVector<Operation*> candidates(region_.begin(), region_.end());
    candidates.append(seeds_.begin(), seeds_.end());
    llvm::sort(candidates, [&](Operation* x, Operation* y) { return position_[x] > position_[y]; });
    for (Operation* op : candidates)
      if (op->use_empty()) op->erase();
    for (Operation* op : rebuilt_)
      if (op->use_empty()) op->erase();
    for (Operation* op : gathers_)  // whole <- [slice] <- flat <- all_gather
      while (op && op->use_empty()) {
        Operation* next = op->getOperand(0).getDefiningOp();
        op->erase();
        op = next;
      }
  }

  func::FuncOp function_;
  Block& block_;
  std::string axis_;
  int64_t replicas_;  // the devices the slices are cut over
  int64_t microBatches_ = 1;
  ReplicationAnalysis analysis_;
  llvm::DenseMap<Operation*, int> position_;
  llvm::SetVector<Operation*> region_;
  llvm::SetVector<Operation*> seeds_;
  llvm::DenseSet<Operation*> keepsFull_;
  SmallVector<Operation*> gathers_, clones_, rebuilt_;
  IRMapping slices_;  // full value -> this replica's slice
};

struct ShardUpdatePass : impl::ShardUpdateBase<ShardUpdatePass> {
  void runOnOperation() override {
    getOperation()->walk([&](func::FuncOp function) {
      if (!mappedAxis(function).empty() && function->getAttrOfType<IntegerAttr>(kAxisSizeAttr))
        Sharder(function).run();
    });
  }
};

}  // namespace
}  // namespace spmd::passes
