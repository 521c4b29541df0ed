// What a spmd.fused body may hold, and the fused op's verifier.
#include "ir/SpmdDialect.h"
#include "mlir/IR/TypeUtilities.h"
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

bool isBf16Rounding(Operation* op) {
  if (!llvm::isa<ConvertOp>(op)) return false;
  Type from = getElementTypeOrSelf(op->getOperand(0).getType()), to = getElementTypeOrSelf(op->getResult(0).getType());
  return (from.isF32() && to.isBF16()) || (from.isBF16() && to.isF32());
}

bool isFusable(Operation* op) {
  if (isElementwise(op) || isBf16Rounding(op) || llvm::isa<BroadcastInDimOp>(op)) return true;
  auto constant = llvm::dyn_cast<ConstantOp>(op);
  auto dense = constant ? llvm::dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  return dense && dense.isSplat() && llvm::isa<FloatType>(dense.getElementType());
}

namespace {

bool isBf16Type(Type type) { return getElementTypeOrSelf(type).isBF16(); }

// Whether two tensor types have one shape and layout, whatever their element types.
bool sameSpace(Type a, Type b) {
  auto x = llvm::dyn_cast<RankedTensorType>(a), y = llvm::dyn_cast<RankedTensorType>(b);
  return x && y && x.getShape() == y.getShape() && x.getEncoding() == y.getEncoding();
}

}  // namespace

// The body computes in one element type: f32 where a result is bf16 (a bf16 value is only ever
// rounded into or widened out of f32), the results' type otherwise.
Type FusedOp::computeType() {
  Type first = getElementTypeOrSelf(getResultTypes().front());
  return llvm::any_of(getResultTypes(), isBf16Type) ? Float32Type::get(getContext()) : first;
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
  const Type compute = computeType();
  auto inSpace = [&](Type t) {
    Type element = getElementTypeOrSelf(t);
    return sameSpace(t, getResultTypes().front()) &&
           (element == compute || (compute.isF32() && element.isBF16()));
  };
  for (Type t : getResultTypes())
    if (!inSpace(t))
      return emitOpError() << "every result must lie in the iteration space " << getResultTypes().front()
                           << " (one shape and layout, in the body's type " << compute
                           << ", or bf16 where that is f32), got " << t;
  // A bf16 value (an input, or a rounding's result) is only rounded, widened or yielded: every
  // other op computes in the body's type.
  auto bf16Use = [&](Value v) -> LogicalResult {
    if (!isBf16Type(v.getType())) return success();
    for (Operation* user : v.getUsers())
      if (!isBf16Rounding(user) && !llvm::isa<YieldOp>(user))
        return user->emitOpError() << "in a spmd.fused body reads a bf16 value; only a convert to f32 or the "
                                      "yield may (every other op computes in f32)";
    return success();
  };
  for (BlockArgument arg : body.getArguments())
    if (failed(bf16Use(arg))) return failure();
  for (Operation& op : body.without_terminator()) {
    if (!isFusable(&op))
      return op.emitOpError() << "cannot be part of a spmd.fused body; only elementwise ops, "
                                 "converts between f32 and bf16, splat constants and broadcast_in_dim can";
    Type result = op.getResultTypes().front();
    const bool rounding = isBf16Rounding(&op);
    if (!inSpace(result) || (!rounding && getElementTypeOrSelf(result) != compute))
      return op.emitOpError() << "in a spmd.fused body must produce the iteration space " << getResultTypes().front()
                              << " in " << compute << (rounding ? " or bf16" : "") << ", got " << result;
    if (failed(bf16Use(op.getResult(0)))) return failure();
    if (auto broadcast = llvm::dyn_cast<BroadcastInDimOp>(op);
        broadcast && !llvm::isa<BlockArgument>(broadcast.getInput()))
      return op.emitOpError() << "in a spmd.fused body must broadcast a body argument (an input)";
  }
  return success();
}

}  // namespace spmd::ir
