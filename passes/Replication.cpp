// ReplicationAnalysis: one forward walk over the function (and value_and_grad bodies).
#include "passes/Replication.h"

#include "ir/SpmdDialect.h"
#include "mlir/IR/Builders.h"

namespace spmd::passes {

using namespace mlir;

llvm::StringRef mappedAxis(FunctionOpInterface function) {
  auto axis = function->getAttrOfType<StringAttr>(kAxisNameAttr);
  return axis ? axis.getValue() : llvm::StringRef();
}

ReplicationAnalysis::ReplicationAnalysis(FunctionOpInterface function) {
  if (function.isExternal()) return;
  Block& entry = function.getFunctionBody().front();
  for (unsigned i = 0; i < entry.getNumArguments(); ++i)
    if (function.getArgAttr(i, kMappedAttr)) varying_.insert(entry.getArgument(i));
  visitBlock(entry);
}

void ReplicationAnalysis::visitBlock(Block& block) {
  for (Operation& op : block) visit(&op);
}

void ReplicationAnalysis::visit(Operation* op) {
  auto markAll = [&](bool varying) {
    if (varying)
      for (Value result : op->getResults()) varying_.insert(result);
  };
  // Within replica groups an all_reduce is invariant within each group only: it varies where its
  // operands do.
  if (auto reduce = llvm::dyn_cast<ir::AllReduceOp>(op); reduce && reduce.getReplicaGroups())
    return markAll(llvm::any_of(reduce.getInputs(), [&](Value v) { return varying_.contains(v); }));
  if (auto gather = llvm::dyn_cast<ir::AllGatherOp>(op); gather && gather.getReplicaGroups())
    return markAll(varying_.contains(gather.getInput()));
  if (llvm::isa<ir::AllReduceOp, ir::AllGatherOp>(op)) return markAll(false);
  if (llvm::isa<ir::ReduceScatterOp, ir::PpermuteOp, ir::AllToAllOp, ir::AxisIndexOp>(op)) return markAll(true);
  if (auto vg = llvm::dyn_cast<ir::ValueAndGradOp>(op)) {
    Block& body = vg.getBody().front();
    bool bodyVaries = false;
    for (auto [arg, primal] : llvm::zip(body.getArguments(), vg.getPrimals()))
      if (varying_.contains(primal)) {
        varying_.insert(arg);
        bodyVaries = true;
      }
    visitBlock(body);
    body.walk([&](Operation* inner) {
      for (Value result : inner->getResults()) bodyVaries |= varying_.contains(result);
    });
    Operation* yield = body.getTerminator();
    unsigned yields = yield->getNumOperands();
    for (unsigned i = 0; i < vg->getNumResults(); ++i)
      if (i < yields ? varying_.contains(yield->getOperand(i)) : bodyVaries)
        varying_.insert(vg->getResult(i));
    return;
  }
  if (auto custom = llvm::dyn_cast<ir::CustomVjpOp>(op)) {  // results follow forward's yields
    Block& forward = custom.getForward().front();
    for (auto [arg, input] : llvm::zip(forward.getArguments(), custom.getInputs()))
      if (varying_.contains(input)) varying_.insert(arg);
    visitBlock(forward);
    bool any = false;
    for (auto [i, yielded] : llvm::enumerate(forward.getTerminator()->getOperands())) {
      any |= varying_.contains(yielded);
      if (i < op->getNumResults() && varying_.contains(yielded)) varying_.insert(op->getResult(unsigned(i)));
    }
    Block& backward = custom.getBackward().front();  // conservatively: everything it reads varies
    if (any || llvm::any_of(op->getResults(), [&](Value v) { return varying_.contains(v); }))
      for (Value arg : backward.getArguments()) varying_.insert(arg);
    visitBlock(backward);
    return;
  }
  bool varies = llvm::any_of(op->getOperands(), [&](Value v) { return varying_.contains(v); });
  for (Region& region : op->getRegions())
    for (Block& block : region) visitBlock(block);
  markAll(varies);
}

void ReplicationAnalysis::annotate(FunctionOpInterface function) const {
  UnitAttr unit = UnitAttr::get(function->getContext());
  function->walk([&](Operation* op) {
    if (op == function.getOperation()) return;
    bool varies = llvm::any_of(op->getResults(), [&](Value v) { return varying_.contains(v); });
    if (varies)
      op->setAttr(kVaryingAttr, unit);
    else
      op->removeAttr(kVaryingAttr);
  });
}

}  // namespace spmd::passes
