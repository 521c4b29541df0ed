// Shape rules and verifiers of the backward ops that VJP rules emit, and of value_and_grad.
#include "ir/ShapeChecks.h"
#include "ir/SpmdDialect.h"

using namespace mlir;

namespace spmd::ir {
using namespace checks;
namespace {

// conv2d(input, filter) must produce result_grad's shape: the forward op these gradients belong to.
LogicalResult verifyConvBackward(Operation* op, StringRef name, RankedTensorType input,
                                 RankedTensorType filter, RankedTensorType resultGrad,
                                 ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
                                 std::optional<ArrayRef<int64_t>> dilation, std::optional<uint64_t> groups) {
  OptLoc loc = op->getLoc();
  for (auto [type, what] : {std::pair{input, "input"}, {filter, "filter"}, {resultGrad, "result_grad"}})
    if (type.getRank() != 4) return fail(loc, name, std::string(what) + " must have rank 4, got " + str(type));
  if (input.getElementType() != filter.getElementType() ||
      input.getElementType() != resultGrad.getElementType())
    return fail(loc, name, "element types differ: input " + str(input) + ", filter " +
                               str(filter) + ", result_grad " + str(resultGrad));
  auto out = convOutputShape(loc, name, input, filter, stride, padding, dilation.value_or(ArrayRef<int64_t>()),
                             int64_t(groups.value_or(1)));
  if (failed(out)) return failure();
  if (ArrayRef<int64_t>(*out) != resultGrad.getShape())
    return fail(loc, name, "result_grad " + str(resultGrad) + " does not match the forward conv2d "
                               "output " + str(ArrayRef<int64_t>(*out)) + " of input " + str(input) +
                               " and filter " + str(filter));
  return success();
}

}  // namespace

LogicalResult EmbeddingBackwardOp::verify() {
  auto table = getTableGrad().getType();
  auto ids = getIds().getType(), grad = getResultGrad().getType();
  SmallVector<int64_t> want(ids.getShape());
  if (table.getRank() == 2) want.push_back(table.getDimSize(1));
  if (table.getRank() != 2 || grad.getShape() != ArrayRef<int64_t>(want) ||
      grad.getElementType() != table.getElementType())
    return fail(getLoc(), "embedding_backward", "result_grad " + str(grad) + " must be the embedding of ids " +
                                                    str(ids) + " in table " + str(table) + ", i.e. " +
                                                    str(ArrayRef<int64_t>(want)));
  return success();
}

LogicalResult TakeAlongAxisBackwardOp::verify() {
  auto input = getInputGrad().getType(), indices = getIndices().getType(), grad = getResultGrad().getType();
  const int64_t axis = getAxis();
  bool ok = input.getRank() == indices.getRank() && axis >= 0 && axis < input.getRank() &&
            grad.getShape() == indices.getShape() && grad.getElementType() == input.getElementType();
  for (int64_t d = 0; ok && d < input.getRank(); ++d) ok = d == axis || input.getDimSize(d) == indices.getDimSize(d);
  if (!ok)
    return fail(getLoc(), "take_along_axis_backward",
                "result_grad " + str(grad) + " must be take_along_axis of input_grad " + str(input) + " at indices " +
                    str(indices) + " along axis " + std::to_string(axis) +
                    " (indices of input's rank and sizes off the axis, result_grad of the indices' shape)");
  return success();
}

// reduce_window(input) must produce result_grad's shape; input_grad has the input's type; max
// needs the forward's input to know what each window chose, sum and mean take none.
LogicalResult ReduceWindowBackwardOp::verify() {
  OptLoc loc = getLoc();
  const char* name = "reduce_window_backward";
  auto inputGrad = getInputGrad().getType(), resultGrad = getResultGrad().getType();
  bool max = getReduction() == Reduction::Max;
  if (getReduction() == Reduction::Min)
    return fail(loc, name, "min is not a window reduction (max, sum or mean)");
  if (max != bool(getInput()))
    return fail(loc, name, max ? "max needs the forward's input as its second operand"
                               : "sum and mean take result_grad alone, not the forward's input");
  if (getInput() && getInput().getType() != inputGrad)
    return fail(loc, name, "input_grad " + str(inputGrad) + " must have the input's type " +
                               str(getInput().getType()));
  if (inputGrad.getElementType() != resultGrad.getElementType())
    return fail(loc, name, "element types differ: input_grad " + str(inputGrad) + ", result_grad " +
                               str(resultGrad));
  auto out = windowOutputShape(loc, name, inputGrad, getWindow(), getStride(), getPadding(),
                               getDilation());
  if (failed(out)) return failure();
  if (ArrayRef<int64_t>(*out) != resultGrad.getShape())
    return fail(loc, name, "result_grad " + str(resultGrad) + " does not match the forward " +
                               "reduce_window output " + str(ArrayRef<int64_t>(*out)) +
                               " of input " + str(inputGrad));
  return success();
}

LogicalResult Conv2dBackwardDataOp::verify() {
  return verifyConvBackward(*this, "conv2d_backward_data", getInputGrad().getType(),
                            getFilter().getType(), getResultGrad().getType(), getStride(),
                            getPadding(), getDilation(), getGroups());
}

LogicalResult Conv2dBackwardFilterOp::verify() {
  return verifyConvBackward(*this, "conv2d_backward_filter", getInput().getType(),
                            getFilterGrad().getType(), getResultGrad().getType(), getStride(),
                            getPadding(), getDilation(), getGroups());
}

LogicalResult BatchNormTrainBackwardOp::inferReturnTypes(MLIRContext*, OptLoc loc,
                                                         Adaptor adaptor,
                                                         SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "batch_norm_train_backward";
  auto in = expectTensor(loc, op, "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  if (failed(expectTensor(loc, op, "result_grad", adaptor.getResultGrad(), in->getRank(),
                          in->getElementType())))
    return failure();
  if (!sameUpToLayout(adaptor.getResultGrad().getType(), adaptor.getInput().getType()))
    return fail(loc, op, "result_grad " + str(adaptor.getResultGrad().getType()) +
                             " must have the input's shape and element type " + str(*in));
  if (failed(inferBatchNorm(loc, op, adaptor.getInput(),
                            {adaptor.getScale(), adaptor.getBatchMean(), adaptor.getBatchVariance()},
                            {"scale", "batch_mean", "batch_variance"}, adaptor.getEpsilonAttr())) ||
      failed(expectRowMask(loc, op, adaptor.getMask(), *in)))
    return failure();
  results.push_back(*in);
  results.push_back(adaptor.getScale().getType());
  results.push_back(adaptor.getScale().getType());
  return success();
}

LogicalResult SoftmaxCrossEntropyBackwardOp::inferReturnTypes(MLIRContext*, OptLoc loc,
                                                              Adaptor adaptor,
                                                              SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "softmax_cross_entropy_backward";
  auto logits = expectTensor(loc, op, "logits [N, C]", adaptor.getLogits(), 2);
  if (failed(logits)) return failure();
  for (auto [value, what] : {std::pair{adaptor.getLabels(), "labels [N]"},
                             {adaptor.getLossGrad(), "loss_grad [N]"}}) {
    auto type = expectTensor(loc, op, what, value, 1);
    if (failed(type)) return failure();
    if (type->getDimSize(0) != logits->getDimSize(0))
      return fail(loc, op, std::string(what) + " " + str(*type) +
                               " must have one entry per row of logits " + str(*logits));
  }
  if (llvm::cast<RankedTensorType>(adaptor.getLossGrad().getType()).getElementType() !=
      logits->getElementType())
    return fail(loc, op, "loss_grad must have the logits' element type " +
                             str(logits->getElementType()));
  results.push_back(*logits);
  return success();
}

LogicalResult ValueAndGradOp::verify() {
  Block& body = getBody().front();
  if (body.getNumArguments() != getPrimals().size())
    return emitOpError() << "body has " << body.getNumArguments() << " arguments for "
                         << getPrimals().size() << " primals";
  for (auto [arg, primal] : llvm::zip(body.getArguments(), getPrimals()))
    if (arg.getType() != primal.getType())
      return emitOpError() << "body argument " << arg.getArgNumber() << " is " << arg.getType()
                           << " but its primal is " << primal.getType();
  auto yield = llvm::dyn_cast<YieldOp>(body.getTerminator());
  if (!yield) return emitOpError() << "body must end with spmd.yield";
  if (yield.getValues().empty())
    return emitOpError() << "body must yield a scalar loss first";
  auto loss = llvm::cast<RankedTensorType>(yield.getValues()[0].getType());
  if (loss.getRank() != 0 || !llvm::isa<FloatType>(loss.getElementType()))
    return emitOpError() << "the loss (first yielded value) must be a scalar float tensor, "
                            "got "
                         << loss << "; reduce it first (e.g. with reduce_mean)";
  SmallVector<Type> expected(yield.getValues().getTypes());
  llvm::append_range(expected, getPrimals().getTypes());
  if (SmallVector<Type>(getResultTypes()) != expected)
    return emitOpError() << "results must be the yielded values' types then the primals' types ("
                         << expected.size() << " in all)";
  return success();
}

LogicalResult CustomCallOp::verify() {
  if (getTarget().empty()) return emitOpError() << "needs the name of a registered custom op in `target`";
  if (getResults().empty()) return emitOpError() << "'" << getTarget() << "' must have at least one result";
  return success();
}

LogicalResult CustomVjpOp::verify() {
  Block& forward = getForward().front();
  Block& backward = getBackward().front();
  if (SmallVector<Type>(forward.getArgumentTypes()) != SmallVector<Type>(getInputs().getTypes()))
    return emitOpError() << "forward's arguments must have the inputs' types (" << getInputs().size() << ")";
  auto yield = llvm::dyn_cast<YieldOp>(forward.getTerminator());
  if (!yield) return emitOpError() << "forward must end with spmd.yield";
  const unsigned results = getNumResults();
  if (yield.getValues().size() < results)
    return emitOpError() << "forward yields " << yield.getValues().size() << " values for " << results << " results";
  SmallVector<Type> yielded(yield.getValues().getTypes());
  if (SmallVector<Type>(yielded.begin(), yielded.begin() + results) != SmallVector<Type>(getResultTypes()))
    return emitOpError() << "forward must yield the results' types first";
  SmallVector<Type> expected(yielded.begin() + results, yielded.end());  // the residuals
  llvm::append_range(expected, getResultTypes());                        // then the cotangents
  if (SmallVector<Type>(backward.getArgumentTypes()) != expected)
    return emitOpError() << "backward's arguments must be forward's residuals then one cotangent per result ("
                         << expected.size() << " in all)";
  auto back = llvm::dyn_cast<YieldOp>(backward.getTerminator());
  if (!back) return emitOpError() << "backward must end with spmd.yield";
  if (SmallVector<Type>(back.getValues().getTypes()) != SmallVector<Type>(getInputs().getTypes()))
    return emitOpError() << "backward must yield one cotangent per input, of the input's type ("
                         << getInputs().size() << ")";
  return success();
}

}  // namespace spmd::ir
