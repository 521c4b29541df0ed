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

// The reverse sweep over one value_and_grad body, emitted before its terminator.
class ReverseSweep {
 public:
  explicit ReverseSweep(Block& body) : body_(body), builder_(body.getTerminator()) {}

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
      if (!mark || mark.getInt() != segment) continue;
      Operation* copy = builder_.clone(*op, mapping);
      copy->removeAttr(ir::kRematAttr);
      copy->setAttr(ir::kRecomputedAttr, builder_.getUnitAttr());
      recomputed_[op] = copy;
    }
  }

  LogicalResult visit(Operation* original) {
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
};

// Differentiates the body in place, then moves its ops before the op and replaces its results.
LogicalResult expand(ir::ValueAndGradOp op) {
  Block& body = op.getBody().front();
  auto yield = llvm::cast<ir::YieldOp>(body.getTerminator());
  ReverseSweep sweep(body);
  if (failed(sweep.run(yield))) return failure();

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
  }
};

}  // namespace
}  // namespace spmd::passes
