// customVjp: records the spmd.custom_vjp op with the forward and backward functions traced as
// its two regions (frontend/CustomVjp.h).
#include "frontend/CustomVjp.h"

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "ir/SpmdDialect.h"

namespace spmd::detail {
namespace {

// Traces `f` into a detached block whose arguments have `types`; returns the block, the
// function's leaves yielded.
std::unique_ptr<mlir::Block> traceRegion(Trace& trace, mlir::TypeRange types, const LeafFunction& f,
                                         const std::function<void(std::vector<Tensor>&)>& check, Loc loc) {
  auto block = std::make_unique<mlir::Block>();
  std::vector<Tensor> arguments;
  for (mlir::Type type : types) arguments.push_back(trace.wrap(block->addArgument(type, trace.location(loc))));
  mlir::OpBuilder& builder = trace.builder();
  mlir::OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(block.get());
  std::vector<Tensor> leaves = f(arguments);
  check(leaves);
  llvm::SmallVector<mlir::Value> yielded;
  for (const Tensor& t : leaves) yielded.push_back(trace.valueOf(t, loc));
  builder.create<ir::YieldOp>(trace.location(loc), yielded);
  return block;
}

bool isFloat(DType dtype) { return dtype != DType::i32; }

}  // namespace

std::vector<Tensor> customVjpLeaves(const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                                    const LeafFunction& forward, const size_t& outputs, const LeafFunction& backward,
                                    Loc loc) {
  Trace& trace = Trace::current("customVjp", loc);
  const std::string at = where(loc) + ": spmd::customVjp: ";
  llvm::SmallVector<mlir::Value> operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) throw Error(at + names[i] + " is an undefined tensor");
    if (!isFloat(inputs[i].dtype()))
      throw Error(at + names[i] + " is " + inputs[i].typeString() + " (integer): only float tensors have cotangents; "
                  "capture integer data such as labels in the functions instead of passing it as an argument");
    operands.push_back(trace.valueOf(inputs[i], loc));
  }
  llvm::SmallVector<mlir::Type> resultTypes, residualTypes;
  auto forwardBlock = traceRegion(trace, mlir::ValueRange(operands).getTypes(), forward, [&](std::vector<Tensor>& leaves) {
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i].defined())
        throw Error(at + "the forward function returned an undefined tensor (" + (i < outputs ? "output " : "residual ") +
                    std::to_string(i < outputs ? i : i - outputs) + ")");
      if (i < outputs && !isFloat(leaves[i].dtype()))
        throw Error(at + "output " + std::to_string(i) + " is " + leaves[i].typeString() +
                    " (integer); a customVjp's outputs are float tensors (return integers from outside it)");
      (i < outputs ? resultTypes : residualTypes).push_back(tensorType(leaves[i].dtype(), leaves[i].shape()));
    }
  }, loc);
  llvm::SmallVector<mlir::Type> backwardTypes(residualTypes);
  backwardTypes.append(resultTypes.begin(), resultTypes.end());
  auto backwardBlock = traceRegion(trace, backwardTypes, backward, [&](std::vector<Tensor>& grads) {
    if (grads.size() != inputs.size())
      throw Error(at + "the backward function returned " + std::to_string(grads.size()) + " cotangent tensor(s) for " +
                  std::to_string(inputs.size()) + " argument tensor(s); return one per argument (a std::tuple for "
                  "several arguments, each of its argument's structure)");
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) {  // zeros
        grads[i] = Tensor(Array::zeros(inputs[i].dtype(), inputs[i].shape()));
        continue;
      }
      if (grads[i].dtype() != inputs[i].dtype() || grads[i].shape() != inputs[i].shape())
        throw Error(at + "the backward function's cotangent for " + names[i] + " is " + grads[i].typeString() +
                    " but the argument is " + inputs[i].typeString() + "; a cotangent has its argument's type");
    }
  }, loc);
  auto op = trace.builder().create<ir::CustomVjpOp>(trace.location(loc), resultTypes, operands);
  op.getForward().push_back(forwardBlock.release());
  op.getBackward().push_back(backwardBlock.release());
  std::vector<Tensor> results;
  for (mlir::Value result : op.getResults()) results.push_back(trace.wrap(result));
  return results;
}

}  // namespace spmd::detail
