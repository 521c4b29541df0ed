// What a spmd.fused body may hold, and the fused op's verifier.
#include "ir/SpmdDialect.h"
#include "runtime/base/ElementwiseTable.h"

using namespace mlir;

namespace spmd::ir {

// The ops of the elementwise table (runtime/base/ElementwiseTable.h), whose ODS classes are
// Functor##Op: a row without its op fails to compile here.
bool isElementwise(Operation* op) {
#define SPMD_ELEMENTWISE_ISA(name, Functor, ...) llvm::isa<Functor##Op>(op) ||
  return SPMD_ELEMENTWISE_OPS(SPMD_ELEMENTWISE_ISA) false;
#undef SPMD_ELEMENTWISE_ISA
}

bool isFusable(Operation* op) {
  if (isElementwise(op) || llvm::isa<BroadcastInDimOp>(op)) return true;
  auto constant = llvm::dyn_cast<ConstantOp>(op);
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  return dense && dense.isSplat() && llvm::isa<FloatType>(dense.getElementType());
}

LogicalResult FusedOp::verify() {
  Block& body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << body.getNumArguments() << " arguments for "
                         << getInputs().size() << " inputs";
  for (auto [arg, input] : llvm::zip(body.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError() << "body argument " << arg.getArgNumber() << " is " << arg.getType()
                           << " but input " << arg.getArgNumber() << " is " << input.getType();
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield) return emitOpError() << "body must end with spmd.yield";
  if (yield.getValues().empty()) return emitOpError() << "body must yield at least one result";
  if (SmallVector<Type>(yield.getValues().getTypes()) != SmallVector<Type>(getResultTypes()))
    return emitOpError() << "results must have the types of the yielded values";
  Type space = getResultTypes().front();
  for (Type t : getResultTypes())
    if (t != space)
      return emitOpError() << "every result must have one type (the iteration space " << space
                           << "), got " << t;
  for (Operation& op : body.without_terminator()) {
    if (!isFusable(&op))
      return op.emitOpError() << "cannot be part of a spmd.fused body; only elementwise ops, "
                                 "splat constants and broadcast_in_dim can";
    if (op.getResultTypes().front() != space)
      return op.emitOpError() << "in a spmd.fused body must produce the iteration space "
                              << space << ", got " << op.getResultTypes().front();
    if (auto broadcast = llvm::dyn_cast<BroadcastInDimOp>(op);
        broadcast && !llvm::isa<BlockArgument>(broadcast.getInput()))
      return op.emitOpError() << "in a spmd.fused body must broadcast a body argument (an input)";
  }
  return success();
}

}  // namespace spmd::ir
