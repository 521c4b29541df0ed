// spmd-fuse-elementwise: producer-consumer fusion of elementwise chains into spmd.fused ops. The
// converts between f32 and bf16 that spmd-widen-bf16 puts around a bf16 step's ops join the
// chains too: a fused body then reads bf16 inputs and writes bf16 results itself, where each
// rounding and widening was a pass over memory of its own. So that they can, such converts first
// move across the reshapes and transposes between them and the elementwise ops (a convert
// commutes with an op that only moves elements): a widening read only by such ops moves after
// them, a rounding of such an op's result read by nothing else moves before it, and the op moves
// bf16 elements (half the bytes) instead of f32 ones.
#include <map>
#include <set>

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "passes/Passes.h"

namespace spmd::passes {

#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// The iteration space of a fusable op: its result's shape and layout (a rounding's result is bf16
// where its operand is f32: both lie in one space).
std::pair<ArrayRef<int64_t>, Attribute> spaceOf(Operation* op) {
  auto tensor = llvm::cast<RankedTensorType>(op->getResultTypes().front());
  return {tensor.getShape(), tensor.getEncoding()};
}

bool movesOnly(Operation* op) { return llvm::isa_and_nonnull<ir::ReshapeOp, ir::TransposeOp>(op); }

Type withElement(Type type, Type element) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), element, tensor.getEncoding());
}

// `view` (a reshape or transpose) rebuilt on `operand`, before `before`: its result takes the
// operand's element type.
Value moved(Operation* view, Value operand, Operation* before) {
  OpBuilder builder(before);
  OperationState state(view->getLoc(), view->getName());
  state.addOperands(operand);
  state.addTypes(withElement(view->getResult(0).getType(), getElementTypeOrSelf(operand.getType())));
  state.addAttributes(view->getAttrs());
  return builder.create(state)->getResult(0);
}

// Converts between f32 and bf16 moved across reshapes and transposes toward the elementwise ops
// they may fuse with; each move leaves as many converts as before, or fewer.
void moveConvertsAcrossViews(Block& block) {
  for (bool changed = true; changed;) {
    changed = false;
    SmallVector<Operation*> converts;  // a move erases views and the convert itself, never another convert
    for (Operation& op : block)
      if (ir::isBf16Rounding(&op)) converts.push_back(&op);
    for (Operation* convert : converts) {
      Operation& op = *convert;
      Value input = op.getOperand(0), result = op.getResult(0);
      const bool widening = getElementTypeOrSelf(result.getType()).isF32();
      if (widening && !result.use_empty() && llvm::all_of(result.getUsers(), movesOnly)) {
        // convert(x) -> view  ==>  view(x) -> convert, for each view that reads it
        for (Operation* view : llvm::make_early_inc_range(result.getUsers())) {
          Value narrowView = moved(view, input, view);
          OpBuilder builder(view);
          Value wide = builder.create<ir::ConvertOp>(op.getLoc(), view->getResult(0).getType(), narrowView);
          view->getResult(0).replaceAllUsesWith(wide);
          view->erase();
        }
        op.erase();
        changed = true;
        continue;
      }
      Operation* view = input.getDefiningOp();
      if (!widening && movesOnly(view) && view->getBlock() == &block && input.hasOneUse()) {
        // view(y) -> convert  ==>  convert(y) -> view
        OpBuilder builder(view);
        Value rounded = builder.create<ir::ConvertOp>(
            op.getLoc(), withElement(view->getOperand(0).getType(), getElementTypeOrSelf(result.getType())),
            view->getOperand(0));
        result.replaceAllUsesWith(moved(view, rounded, &op));
        op.erase();
        view->erase();
        changed = true;
      }
    }
  }
}

class Fuser {
 public:
  explicit Fuser(Block& block) : block_(block) {}

  void run() {
    for (Operation& op : block_) {
      if (!ir::isElementwise(&op) && !ir::isBf16Rounding(&op)) continue;
      std::vector<int> joined;
      for (Value operand : op.getOperands()) {
        Operation* producer = operand.getDefiningOp();
        if (!producer || producer->getBlock() != &block_ || !ir::isFusable(producer)) continue;
        if (spaceOf(producer) != spaceOf(&op)) continue;
        if (llvm::isa<ir::BroadcastInDimOp, ir::ConstantOp>(producer) && !group_.count(producer)) {
          absorb_[&op].push_back(producer);  // cloned into this op's group when it is built
          continue;
        }
        auto found = group_.find(producer);
        if (found != group_.end() && !llvm::is_contained(joined, found->second))
          joined.push_back(found->second);
      }
      int target = -1;
      for (int g : joined) {
        if (!canJoin(g, target, &op)) continue;
        if (target < 0)
          target = g;
        else
          merge(g, target);
      }
      if (target < 0) {
        target = static_cast<int>(groups_.size());
        groups_.emplace_back();
      }
      groups_[target].push_back(&op);
      group_[&op] = target;
    }
    for (auto& members : groups_)
      if (members.size() + absorbedCount(members) >= 2) build(members);
    // Broadcasts and constants now cloned into every body that reads them.
    std::set<Operation*> absorbed;
    for (auto& [_, producers] : absorb_) absorbed.insert(producers.begin(), producers.end());
    for (Operation& op : llvm::make_early_inc_range(llvm::reverse(block_)))
      if (absorbed.count(&op) && op.use_empty()) op.erase();
  }

 private:
  // Group g may take `op` (together with group `other`, when set) if every user of a g value
  // outside the union comes after `op`, where the fused op will stand.
  bool canJoin(int g, int other, Operation* op) {
    for (Operation* member : groups_[g])
      for (Operation* user : member->getUsers()) {
        if (user == op) continue;
        auto it = group_.find(user);
        if (it != group_.end() && (it->second == g || it->second == other)) continue;
        if (user->getBlock() == &block_ && user->isBeforeInBlock(op)) return false;
      }
    return true;
  }

  void merge(int from, int into) {
    for (Operation* member : groups_[from]) {
      groups_[into].push_back(member);
      group_[member] = into;
    }
    groups_[from].clear();
  }

  size_t absorbedCount(const std::vector<Operation*>& members) {
    size_t count = 0;
    for (Operation* member : members) count += absorb_.count(member) ? absorb_[member].size() : 0;
    return count;
  }

  void build(std::vector<Operation*>& members) {
    std::sort(members.begin(), members.end(),
              [](Operation* a, Operation* b) { return a->isBeforeInBlock(b); });
    std::set<Operation*> inGroup(members.begin(), members.end());
    Operation* last = members.back();
    MLIRContext* context = last->getContext();

    // Inputs: values from outside, in first-use order; broadcasts are read through their input.
    SmallVector<Value> inputs;
    auto addInput = [&](Value v) {
      if (!llvm::is_contained(inputs, v)) inputs.push_back(v);
    };
    for (Operation* member : members)
      for (Value operand : member->getOperands()) {
        Operation* producer = operand.getDefiningOp();
        if (producer && inGroup.count(producer)) continue;
        bool absorbed = absorb_.count(member) && producer && llvm::is_contained(absorb_[member], producer);
        if (absorbed && llvm::isa<ir::ConstantOp>(producer)) continue;
        addInput(absorbed ? producer->getOperand(0) : operand);
      }
    // Results: group values used outside the group.
    SmallVector<Value> results;
    for (Operation* member : members)
      for (Value result : member->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation* u) { return !inGroup.count(u); }))
          results.push_back(result);

    SmallVector<Location> locations;
    for (Operation* member : members) locations.push_back(member->getLoc());
    OpBuilder builder(last);
    auto fused = builder.create<ir::FusedOp>(FusedLoc::get(context, locations),
                                             TypeRange(ValueRange(results)), inputs);
    Block* body = builder.createBlock(&fused.getBody());
    IRMapping map;
    for (Value input : inputs) map.map(input, body->addArgument(input.getType(), input.getLoc()));
    builder.setInsertionPointToStart(body);
    for (Operation* member : members) {
      if (absorb_.count(member))
        for (Operation* producer : absorb_[member])
          if (!map.contains(producer->getResult(0)))
            map.map(producer->getResult(0), builder.clone(*producer, map)->getResult(0));
      builder.clone(*member, map);
    }
    SmallVector<Value> yielded;
    for (Value result : results) yielded.push_back(map.lookup(result));
    builder.create<ir::YieldOp>(last->getLoc(), yielded);

    for (auto [old, now] : llvm::zip(results, fused.getResults())) old.replaceAllUsesWith(now);
    for (Operation* member : llvm::reverse(members)) member->erase();
  }

  Block& block_;
  std::vector<std::vector<Operation*>> groups_;
  std::map<Operation*, int> group_;
  std::map<Operation*, std::vector<Operation*>> absorb_;  // broadcasts/constants an op reads
};

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    getOperation()->walk([](FunctionOpInterface function) {
      if (function.isExternal()) return;
      moveConvertsAcrossViews(function.getFunctionBody().front());
      Fuser(function.getFunctionBody().front()).run();
    });
  }
};

}  // namespace
}  // namespace spmd::passes
