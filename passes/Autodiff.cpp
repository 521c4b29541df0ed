// spmd-autodiff: expands spmd.value_and_grad into the body's forward ops and the reverse sweep
// of their VJP rules (reverse-mode autodiff on the IR, as JAX transforms a jaxpr).
// Rematerialization (spmd::checkpoint, jax.checkpoint): ops marked with one spmd.remat segment
// are copied, in forward order, right where the reverse sweep reaches the segment's last op, and
// the segment's VJP rules read the copies instead of the forward values. The forward values of
// the segment then die with the forward pass (only its inputs and outputs are kept), and the
// copies recompute them from the segment's inputs with the same ops: the same bits.
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "passes/Passes.h"

namespace spmd::passes {

#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;
using ir::Differentiation;

bool isFloatTensor(Value v) {
  auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
  return type && llvm::isa<FloatType>(type.getElementType());
}

Value zerosLike(OpBuilder& b, Location loc, Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  auto attr = SplatElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), 0.0));
  return b.create<ir::ConstantOp>(loc, llvm::cast<ElementsAttr>(attr));
}

// A custom_vjp whose forward was inlined: where its results now come from, and what its
// backward reads.
struct InlinedCustomVjp {
  ir::CustomVjpOp op;
  SmallVector<Value> outputs, residuals;
};

// Inlines `op`'s forward region right before it (every copied op marked with `group` when it is
// not negative) and replaces the op's results with the copies' first yields. The op stays, its
// results unused, until the sweep has emitted its backward.
InlinedCustomVjp inlineForward(ir::CustomVjpOp op, int64_t group) {
  OpBuilder b(op);
  IRMapping mapping;
  Block& forward = op.getForward().front();
  for (auto [arg, input] : llvm::zip(forward.getArguments(), op.getInputs())) mapping.map(arg, input);
  for (Operation& inner : forward.without_terminator()) {
    Operation* copy = b.clone(inner, mapping);
    if (group >= 0)
      copy->walk([&](Operation* o) { o->setAttr(ir::kCustomForwardAttr, b.getI64IntegerAttr(group)); });
  }
  SmallVector<Value> yielded;
  for (Value v : forward.getTerminator()->getOperands()) yielded.push_back(mapping.lookupOrDefault(v));
  InlinedCustomVjp inlined{op, SmallVector<Value>(ArrayRef<Value>(yielded).take_front(op->getNumResults())),
                           SmallVector<Value>(ArrayRef<Value>(yielded).drop_front(op->getNumResults()))};
  op->replaceAllUsesWith(inlined.outputs);
  return inlined;
}

// The reverse sweep over one value_and_grad body, emitted before its terminator.
class ReverseSweep {
 public:
  explicit ReverseSweep(Block& body) : body_(body), builder_(body.getTerminator()) {}

  // Inlines the forward of every custom_vjp of the body, in order; one its forward holds is
  // inlined with the outer one's number (the outer backward stands for it).
  void inlineCustomVjps() {
    for (bool found = true; found;) {
      found = false;
      for (Operation& op : body_.without_terminator()) {
        auto custom = llvm::dyn_cast<ir::CustomVjpOp>(&op);
        if (!custom || inlinedOps_.contains(custom)) continue;
        inlinedOps_.insert(custom);
        found = true;
        if (auto outer = custom->getAttrOfType<IntegerAttr>(ir::kCustomForwardAttr))
          inlineForward(custom, outer.getInt());
        else {
          customIndex_[custom] = customs_.size();
          customs_.push_back(inlineForward(custom, int64_t(customs_.size())));
        }
        break;  // the block changed: look again from the start
      }
    }
  }

  // The custom_vjp ops whose forward was inlined (erased once the sweep is done).
  const llvm::DenseSet<Operation*>& inlinedCustomVjps() const { return inlinedOps_; }

  LogicalResult run(ir::YieldOp yield) {
    markActive();
    SmallVector<Operation*> forward;
    for (Operation& op : body_.without_terminator()) forward.push_back(&op);
    Value loss = yield.getValues()[0];
    if (active_.contains(loss)) {
      auto type = llvm::cast<RankedTensorType>(loss.getType());
      auto one = SplatElementsAttr::get(type, builder_.getFloatAttr(type.getElementType(), 1.0));
      cotangents_[loss] = builder_.create<ir::ConstantOp>(yield.getLoc(), llvm::cast<ElementsAttr>(one));
    }
    for (Operation* op : llvm::reverse(forward)) {
      if (auto segment = op->getAttrOfType<IntegerAttr>(ir::kRematAttr); segment && !recomputed_.contains(op))
        recompute(forward, segment.getInt());
      // A custom_vjp's backward reads its residuals: recompute their checkpoint segments first.
      if (auto custom = customIndex_.find(op); custom != customIndex_.end())
        for (Value residual : customs_[custom->second].residuals)
          if (Operation* def = residual.getDefiningOp())
            if (auto segment = def->getAttrOfType<IntegerAttr>(ir::kRematAttr); segment && !recomputed_.contains(def))
              recompute(forward, segment.getInt());
      if (failed(visit(op))) return failure();
    }
    return success();
  }

  // d(loss)/d(argument): the accumulated cotangent, or zeros when the loss does not depend on it.
  Value gradient(BlockArgument arg, Location loc) {
    if (Value g = cotangents_.lookup(arg)) return g;
    return zerosLike(builder_, loc, arg.getType());
  }

 private:
  // Values that depend on a block argument (the differentiated inputs).
  void markActive() {
    for (BlockArgument arg : body_.getArguments()) active_.insert(arg);
    for (Operation& op : body_.without_terminator())
      if (llvm::any_of(op.getOperands(), [&](Value v) { return active_.contains(v); }))
        for (Value result : op.getResults())
          if (isFloatTensor(result)) active_.insert(result);
  }

  // Copies every op of checkpoint segment `segment` (in forward order) to the sweep's insertion
  // point; their copies stand in for them in the VJP rules (visit). Operands from outside the
  // segment (its inputs) are read as they are; the copies are marked so CSE keeps them apart.
  void recompute(ArrayRef<Operation*> forward, int64_t segment) {
    IRMapping mapping;
    builder_.setInsertionPoint(body_.getTerminator());
    for (Operation* op : forward) {
      auto mark = op->getAttrOfType<IntegerAttr>(ir::kRematAttr);
      if (!mark || mark.getInt() != segment || llvm::isa<ir::CustomVjpOp>(op)) continue;  // its forward is inlined
      Operation* copy = builder_.clone(*op, mapping);
      copy->removeAttr(ir::kRematAttr);
      copy->setAttr(ir::kRecomputedAttr, builder_.getUnitAttr());
      recomputed_[op] = copy;
    }
  }

  // The value the backward pass reads for forward value `v`: its recomputed copy's when a
  // checkpoint segment made one.
  Value recomputedValue(Value v) {
    auto result = llvm::dyn_cast<OpResult>(v);
    if (!result) return v;
    Operation* copy = recomputed_.lookup(result.getOwner());
    return copy ? copy->getResult(result.getResultNumber()) : v;
  }

  // A custom_vjp's backward, copied where the sweep is: its residuals (recomputed where a
  // checkpoint recomputes them) and its outputs' cotangents (zeros where the loss does not
  // depend on one) in, each input's cotangent added to it.
  LogicalResult backwardOf(ir::CustomVjpOp op) {
    auto found = customIndex_.find(op);
    if (found == customIndex_.end()) return success();  // inside another custom_vjp's forward: its backward covers it
    const int64_t group = int64_t(found->second);
    const InlinedCustomVjp* custom = &customs_[found->second];
    // Forward must not read, from outside its arguments, a value the loss is differentiated
    // through: that value's gradient would be lost.
    for (Operation& inner : body_.without_terminator()) {
      auto mark = inner.getAttrOfType<IntegerAttr>(ir::kCustomForwardAttr);
      if (!mark || mark.getInt() != group) continue;
      for (Value operand : inner.getOperands()) {
        Operation* def = operand.getDefiningOp();
        auto defMark = def ? def->getAttrOfType<IntegerAttr>(ir::kCustomForwardAttr) : IntegerAttr();
        if ((defMark && defMark.getInt() == group) || llvm::is_contained(op.getInputs(), operand)) continue;
        if (active_.contains(operand))
          return op.emitError() << "spmd-autodiff: the forward function of this customVjp reads a value from outside its "
                                   "arguments that depends on what is differentiated, so its gradient would be lost; "
                                   "pass that value to the customVjp function as an argument (its backward then "
                                   "returns its cotangent)";
      }
    }
    bool any = false;
    for (Value output : custom->outputs) any |= bool(cotangents_.lookup(output));
    if (!any) return success();
    builder_.setInsertionPoint(body_.getTerminator());
    IRMapping mapping;
    Block& backward = op.getBackward().front();
    const size_t residuals = custom->residuals.size();
    for (size_t i = 0; i < residuals; ++i) mapping.map(backward.getArgument(unsigned(i)), recomputedValue(custom->residuals[i]));
    for (auto [i, output] : llvm::enumerate(custom->outputs)) {
      Value g = cotangents_.lookup(output);
      mapping.map(backward.getArgument(unsigned(residuals + i)), g ? g : zerosLike(builder_, op.getLoc(), output.getType()));
    }
    for (Operation& inner : backward.without_terminator()) builder_.clone(inner, mapping);
    for (auto [input, grad] : llvm::zip(op.getInputs(), backward.getTerminator()->getOperands())) {
      if (!active_.contains(input)) continue;
      Value g = mapping.lookupOrDefault(grad);
      Value& total = cotangents_[input];
      total = total ? builder_.create<ir::AddOp>(op.getLoc(), total, g).getResult() : g;
    }
    return success();
  }

  LogicalResult visit(Operation* original) {
    if (auto custom = llvm::dyn_cast<ir::CustomVjpOp>(original)) return backwardOf(custom);
    if (original->hasAttr(ir::kCustomForwardAttr)) return success();  // a custom_vjp's backward stands for it
    // A checkpointed op's VJP reads its recomputed copy's operands and results.
    Operation* op = recomputed_.lookup(original);
    if (!op) op = original;
    SmallVector<Value> resultGrads;
    bool any = false;
    for (Value result : original->getResults()) {
      resultGrads.push_back(cotangents_.lookup(result));
      any |= bool(resultGrads.back());
    }
    if (!any) return success();
    if (auto call = llvm::dyn_cast<ir::CustomCallOp>(op))
      return op->emitError() << "spmd-autodiff: custom op '" << call.getTarget()
                             << "' has no VJP, so gradients cannot flow through it; give its registration one "
                                "(spmd::CustomOp::vjp) or stop the gradient before it";
    switch (ir::differentiation(op)) {
      case Differentiation::ZeroGradient: return success();
      case Differentiation::FirstOrderOnly:
        return op->emitError() << "spmd-autodiff: cannot differentiate " << op->getName()
                               << ": it is a backward op, and second derivatives (grad of grad) "
                                  "are not supported";
      case Differentiation::None:
        return op->emitError() << "spmd-autodiff: " << op->getName()
                               << " has no VJP rule, so gradients cannot flow through it";
      case Differentiation::Vjp: break;
    }
    SmallVector<Value> operandGrads;
    builder_.setInsertionPoint(body_.getTerminator());
    if (failed(llvm::cast<ir::VjpOpInterface>(op).buildVjp(builder_, resultGrads, operandGrads)))
      return failure();
    if (operandGrads.size() != op->getNumOperands())
      return op->emitError() << "spmd-autodiff: internal error: the VJP rule of " << op->getName()
                             << " returned " << operandGrads.size() << " cotangents for "
                             << op->getNumOperands() << " operands";
    for (auto [operand, grad] : llvm::zip(original->getOperands(), operandGrads)) {
      if (!grad || !active_.contains(operand)) continue;
      Value& total = cotangents_[operand];
      total = total ? builder_.create<ir::AddOp>(op->getLoc(), total, grad).getResult() : grad;
    }
    return success();
  }

  Block& body_;
  OpBuilder builder_;
  llvm::DenseSet<Value> active_;
  llvm::DenseMap<Value, Value> cotangents_;
  llvm::DenseMap<Operation*, Operation*> recomputed_;  // checkpointed op -> its copy
  SmallVector<InlinedCustomVjp> customs_;              // by number (spmd.custom_forward)
  llvm::DenseMap<Operation*, size_t> customIndex_;     // a custom_vjp op -> its number
  llvm::DenseSet<Operation*> inlinedOps_;
};

// Drops the sweep's marks from the ops inlined from custom_vjp forwards.
void clearCustomMarks(Block& block) {
  block.walk([](Operation* op) { op->removeAttr(ir::kCustomForwardAttr); });
}

// Differentiates the body in place, then moves its ops before the op and replaces its results.
LogicalResult expand(ir::ValueAndGradOp op) {
  Block& body = op.getBody().front();
  auto yield = llvm::cast<ir::YieldOp>(body.getTerminator());
  ReverseSweep sweep(body);
  sweep.inlineCustomVjps();
  if (failed(sweep.run(yield))) return failure();
  for (Operation* custom : sweep.inlinedCustomVjps()) custom->erase();
  clearCustomMarks(body);

  SmallVector<Value> results(yield.getValues());
  for (BlockArgument arg : body.getArguments()) results.push_back(sweep.gradient(arg, op.getLoc()));
  yield->erase();

  for (auto [arg, primal] : llvm::zip(body.getArguments(), op.getPrimals()))
    arg.replaceAllUsesWith(primal);
  op->getBlock()->getOperations().splice(op->getIterator(), body.getOperations());
  op->replaceAllUsesWith(results);
  op->erase();
  return success();
}

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    // Post-order: a value_and_grad nested in another's body expands first.
    SmallVector<ir::ValueAndGradOp> ops;
    getOperation()->walk([&](ir::ValueAndGradOp op) { ops.push_back(op); });
    for (ir::ValueAndGradOp op : ops)
      if (failed(expand(op))) return signalPassFailure();
    // Where no gradient is taken a custom_vjp is its forward function (outermost first: an inner
    // one inlined from it is met again by the walk after the outer's copies).
    for (bool found = true; found;) {
      ir::CustomVjpOp next;
      getOperation()->walk([&](ir::CustomVjpOp op) {
        if (!next) next = op;
      });
      found = bool(next);
      if (next) {
        inlineForward(next, -1);
        next->erase();
      }
    }
  }
};

}  // namespace
}  // namespace spmd::passes
