// value_and_grad: records the spmd.value_and_grad op with the loss function traced as its body.
#include "frontend/Grad.h"

#include <algorithm>

#include "ir/SpmdDialect.h"
#include "frontend/Mesh.h"
#include "frontend/Trace.h"

namespace spmd::detail {

std::vector<Tensor> valueAndGradLeaves(const std::vector<Tensor>& primals,
                                       const std::vector<std::string>& names,
                                       const GradBody& body, Loc loc) {
  Trace& trace = Trace::current("value_and_grad", loc);
  llvm::SmallVector<mlir::Value> operands;
  for (size_t i = 0; i < primals.size(); ++i) {
    if (primals[i].defined() && primals[i].dtype() == DType::i32)
      throw Error(where(loc) + ": spmd::value_and_grad: cannot differentiate with respect to " +
                  names[i] + ", which is " + primals[i].typeString() +
                  " (integer); only float tensors have gradients. Capture integer data such as "
                  "labels in the loss function instead of passing it as a parameter");
    operands.push_back(trace.valueOf(primals[i], loc));
  }

  // Trace the loss function into a detached block whose arguments stand for the primals.
  auto block = std::make_unique<mlir::Block>();
  std::vector<Tensor> arguments;
  for (mlir::Value operand : operands)
    arguments.push_back(trace.wrap(block->addArgument(operand.getType(), trace.location(loc))));
  mlir::OpBuilder& builder = trace.builder();
  std::vector<Tensor> outputs;
  llvm::SmallVector<mlir::Value> yielded;
  {
    mlir::OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(block.get());
    outputs = body(arguments);
    if (outputs.empty() || !outputs[0].defined())
      throw Error(where(loc) + ": spmd::value_and_grad: the function returned no loss");
    const Tensor& loss = outputs[0];
    if (loss.rank() != 0 || loss.dtype() == DType::i32)
      throw Error(where(loc) + ": spmd::value_and_grad: the loss must be a scalar float tensor, "
                  "got " + loss.typeString() + "; reduce it first, e.g. spmd::mean(loss, {0})");
    for (const Tensor& t : outputs) yielded.push_back(trace.valueOf(t, loc));
    builder.create<ir::YieldOp>(trace.location(loc), yielded);
  }

  llvm::SmallVector<mlir::Type> types(mlir::ValueRange(yielded).getTypes());
  for (mlir::Value operand : operands) types.push_back(operand.getType());
  auto op = builder.create<ir::ValueAndGradOp>(trace.location(loc), types, operands);
  op.getBody().push_back(block.release());

  std::vector<Tensor> results;
  for (mlir::Value result : op.getResults()) results.push_back(trace.wrap(result));
  if (trace.mesh() && trace.sumsGradients()) {  // shardMap's sumGradients: each over its copies' axes
    const size_t first = results.size() - primals.size();
    std::vector<Tensor> grads(results.begin() + std::ptrdiff_t(first), results.end());
    grads = sumGradientsOverCopies(primals, std::move(grads), loc);
    std::copy(grads.begin(), grads.end(), results.begin() + std::ptrdiff_t(first));
  }
  return results;
}

}  // namespace spmd::detail
