// spmd-insert-pmean: every replicated output of a mapped function must be invariant across the
// axis. Gradients of replicated parameters are averaged where value_and_grad produces them; a
// scalar (a loss, a metric) or a new value of a replicated input (BatchNorm running statistics)
// that still varies is averaged just before the return. Any other varying output (logits,
// per-example losses) is an error: averaging it would silently return a value nobody asked for.
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/RegionUtils.h"
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

bool isScalar(Value v) { return llvm::cast<RankedTensorType>(v.getType()).getRank() == 0; }

// Whether `value` is computed from a replicated (unmapped) argument of its own type: the new
// value of replicated state, such as a running statistic updated from batch statistics.
bool updatesReplicatedArgument(func::FuncOp function, Value value) {
  llvm::DenseSet<Value> seen{value};
  SmallVector<Value> worklist{value};
  auto visit = [&](Value v) {
    if (seen.insert(v).second) worklist.push_back(v);
  };
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (auto arg = llvm::dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner()->getParentOp() == function.getOperation() && arg.getType() == value.getType() &&
          !function.getArgAttr(arg.getArgNumber(), kMappedAttr))
        return true;
      continue;
    }
    Operation* def = v.getDefiningOp();
    for (Value operand : def->getOperands()) visit(operand);
    llvm::SetVector<Value> captured;  // values a region uses from outside it
    for (Region& region : def->getRegions()) getUsedValuesDefinedAbove(region, captured);
    for (Value c : captured) visit(c);
  }
  return false;
}

// The inserted all_reduce is located at `loc` and named for why it is there (the IR dump and
// the Program's step say "inserted pmean: <reason>").
Value pmean(OpBuilder& b, Location loc, Value value, StringRef axis, const std::string& reason) {
  Location inserted = NameLoc::get(b.getStringAttr("inserted pmean: " + reason), loc);
  return b.create<ir::AllReduceOp>(inserted, ValueRange{value}, axis, ir::Reduction::Mean).getResult(0);
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
      Value averaged = pmean(b, vg.getLoc(), gradient, axis_,
                             "gradient of replicated parameter #" + std::to_string(parameter) + ", which " +
                                 outputName(function_, reachedFrom.lookup(gradient)) + " needs averaged");
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
      if (!isScalar(value) && !updatesReplicatedArgument(function_, value))
        return emitError(at) << "spmd-insert-pmean: " << outputName(function_, i) << " of type "
                             << value.getType() << " varies across axis '" << axis_
                             << "' (it is computed from mapped data) and is neither a scalar (a "
                                "loss or metric, averaged) nor a new value of a replicated input of "
                                "its type (parameters, BatchNorm statistics, averaged), so averaging "
                                "it would be a guess; return it per replica with outAxes = 0 "
                                "(spmd::PmapOptions), or average it yourself with spmd::pmean(value, \""
                             << axis_ << "\")";
      ret.setOperand(i, pmean(b, at, value, axis_,
                              outputName(function_, i) + (isScalar(value) ? ", a scalar that varies"
                                                                          : ", a new value of a replicated input")));
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
