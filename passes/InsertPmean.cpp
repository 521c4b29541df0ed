// spmd-insert-pmean: every replicated output of a mapped function must be invariant across the
// axis. Gradients of replicated parameters are averaged where value_and_grad produces them;
// anything else that still varies is averaged just before the return.
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "passes/Passes.h"
#include "passes/Replication.h"

namespace spmd::passes {

#define GEN_PASS_DEF_INSERTPMEAN
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// "output 3 ('grads.fc.weight')"
std::string outputName(func::FuncOp function, unsigned index) {
  std::string text = "replicated output " + std::to_string(index);
  if (auto name = function.getResultAttrOfType<StringAttr>(index, kNameAttr))
    text += " ('" + name.str() + "')";
  return text;
}

bool isFloat(Value v) {
  return llvm::isa<FloatType>(llvm::cast<RankedTensorType>(v.getType()).getElementType());
}

Value pmean(OpBuilder& b, Location loc, Value value, StringRef axis) {
  Location inserted = NameLoc::get(b.getStringAttr("inserted pmean"), loc);
  return b.create<ir::AllReduceOp>(inserted, ValueRange{value}, axis, "mean").getResult(0);
}

class Inserter {
 public:
  Inserter(func::FuncOp function, bool strict)
      : function_(function), strict_(strict), axis_(mappedAxis(function).str()) {}

  LogicalResult run() {
    auto ret = llvm::cast<func::ReturnOp>(function_.getBody().front().getTerminator());
    // 1. Gradients of replicated parameters that a varying replicated output depends on.
    ReplicationAnalysis before(function_);
    llvm::SetVector<OpResult> gradients;
    llvm::DenseMap<Value, unsigned> reachedFrom;  // value -> output index that needs it
    SmallVector<Value> worklist;
    for (unsigned i = 0; i < ret.getNumOperands(); ++i)
      if (!isMapped(i) && before.isVarying(ret.getOperand(i)) &&
          reachedFrom.try_emplace(ret.getOperand(i), i).second)
        worklist.push_back(ret.getOperand(i));
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      unsigned output = reachedFrom.lookup(value);
      Operation* def = value.getDefiningOp();
      if (!def) continue;
      if (auto vg = llvm::dyn_cast<ir::ValueAndGradOp>(def)) {
        unsigned index = llvm::cast<OpResult>(value).getResultNumber();
        unsigned yields = vg->getNumResults() - vg.getPrimals().size();
        if (index >= yields && !before.isVarying(vg.getPrimals()[index - yields]) &&
            isFloat(value))
          gradients.insert(llvm::cast<OpResult>(value));
        continue;  // the loss and aux values are averaged at the return if still varying
      }
      for (Value operand : def->getOperands())
        if (before.isVarying(operand) && reachedFrom.try_emplace(operand, output).second)
          worklist.push_back(operand);
    }
    for (OpResult gradient : gradients) {
      auto vg = llvm::cast<ir::ValueAndGradOp>(gradient.getOwner());
      unsigned parameter = gradient.getResultNumber() -
                           (vg->getNumResults() - vg.getPrimals().size());
      if (strict_)
        return vg.emitError() << "spmd-insert-pmean (strict): "
                              << outputName(function_, reachedFrom.lookup(gradient))
                              << " depends on the gradient of replicated parameter #" << parameter
                              << " of this value_and_grad, which varies across axis '" << axis_
                              << "' (it is computed from mapped data); average it with "
                                 "spmd::pmean(grads, \""
                              << axis_ << "\") or return the output mapped (out_axes)";
      OpBuilder b(vg->getContext());
      b.setInsertionPointAfter(vg);
      Value averaged = pmean(b, vg.getLoc(), gradient, axis_);
      gradient.replaceAllUsesExcept(averaged, averaged.getDefiningOp());
    }

    // 2. Whatever replicated output still varies is averaged just before the return.
    ReplicationAnalysis after(function_);
    OpBuilder b(ret);
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      Value value = ret.getOperand(i);
      if (isMapped(i) || !after.isVarying(value)) continue;
      Location at = value.getDefiningOp() ? value.getDefiningOp()->getLoc() : ret.getLoc();
      if (!isFloat(value))
        return emitError(at) << "spmd-insert-pmean: " << outputName(function_, i)
                             << " is an integer tensor that varies across axis '" << axis_
                             << "'; averaging would truncate it, so sum it yourself "
                                "(spmd::psum) or return it mapped (out_axes)";
      if (strict_)
        return emitError(at) << "spmd-insert-pmean (strict): " << outputName(function_, i)
                             << " varies across axis '" << axis_
                             << "' (it is computed from mapped data); average it with "
                                "spmd::pmean(value, \""
                             << axis_ << "\") or return it mapped (out_axes)";
      ret.setOperand(i, pmean(b, at, value, axis_));
    }
    ReplicationAnalysis(function_).annotate(function_);
    return success();
  }

 private:
  bool isMapped(unsigned result) {
    return bool(function_.getResultAttr(result, kMappedAttr));
  }

  func::FuncOp function_;
  bool strict_;
  std::string axis_;
};

struct InsertPmeanPass : impl::InsertPmeanBase<InsertPmeanPass> {
  using InsertPmeanBase::InsertPmeanBase;
  void runOnOperation() override {
    auto result = getOperation()->walk([&](func::FuncOp function) {
      if (mappedAxis(function).empty()) return WalkResult::advance();
      return failed(Inserter(function, strict).run()) ? WalkResult::interrupt()
                                                      : WalkResult::advance();
    });
    if (result.wasInterrupted()) signalPassFailure();
  }
};

}  // namespace
}  // namespace spmd::passes
