// Shape rules of the `spmd` ops: result types from operands and attributes. Each rule also
// verifies its op, naming the op, the offending shapes and how to fix them.
#include <functional>
#include <numeric>
#include <optional>
#include <string>

#include "ir/SpmdDialect.h"
#include "ir/ShapeChecks.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace spmd::ir {
using namespace checks;
namespace {

template <typename Adaptor>
LogicalResult inferReduction(OptLoc loc, StringRef op, Adaptor adaptor,
                             SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, op, "input", adaptor.getInput(), -1);
  if (failed(in) || failed(checkAxes(loc, op, adaptor.getAxes(), in->getRank())))
    return failure();
  results.push_back(
      RankedTensorType::get(dropAxes(in->getShape(), adaptor.getAxes()), in->getElementType()));
  return success();
}

}  // namespace

//===--- constants ---------------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& results) {
  auto type = llvm::dyn_cast_or_null<RankedTensorType>(
      adaptor.getValueAttr() ? adaptor.getValueAttr().getType() : Type());
  if (!type) return fail(loc, "constant", "value must be a ranked tensor literal");
  results.push_back(type);
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }
// Autodiff has run before any folding (compiler/Pipeline.cpp): the mark has done its work.
OpFoldResult StopGradientOp::fold(FoldAdaptor) { return getInput(); }

//===--- convolution and normalization -------------------------------------------------------===//

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "conv2d";
  auto in = expectTensor(loc, op, "input (N, C, H, W)", adaptor.getInput(), 4);
  if (failed(in)) return failure();
  auto filter = expectTensor(loc, op, "filter (O, I, KH, KW)", adaptor.getFilter(), 4,
                             in->getElementType());
  if (failed(filter)) return failure();
  // The filter against the input first: a wrong filter is named as such, not by its bias.
  auto out = convOutputShape(loc, op, *in, *filter, adaptor.getStride(), adaptor.getPadding(),
                             adaptor.getDilation().value_or(ArrayRef<int64_t>()), adaptor.getGroups().value_or(1));
  if (failed(out)) return failure();
  if (adaptor.getBias() && failed(expectPerChannel(loc, op, "bias", adaptor.getBias(),
                                                   filter->getDimSize(0), in->getElementType())))
    return failure();
  results.push_back(RankedTensorType::get(*out, in->getElementType()));
  return success();
}

LogicalResult BatchNormTrainOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& results) {
  if (failed(inferBatchNorm(loc, "batch_norm_train", adaptor.getInput(),
                            {adaptor.getScale(), adaptor.getOffset()}, {"scale", "offset"},
                            adaptor.getEpsilonAttr())) ||
      failed(expectRowMask(loc, "batch_norm_train", adaptor.getMask(),
                           llvm::cast<RankedTensorType>(adaptor.getInput().getType()))))
    return failure();
  auto input = llvm::cast<RankedTensorType>(adaptor.getInput().getType());
  if (input.getNumElements() == 0 && input.getDimSize(1) > 0)
    return fail(loc, "batch_norm_train",
                "input " + str(input) + " holds no value per channel: its batch statistics would be NaN (0 / 0) "
                "and would make the running statistics NaN; give it at least one example (an empty batch "
                "can skip the step, or use batchNormInfer)");
  results.push_back(adaptor.getInput().getType());
  results.push_back(adaptor.getScale().getType());
  results.push_back(adaptor.getScale().getType());
  return success();
}

LogicalResult BatchNormInferOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& results) {
  if (failed(inferBatchNorm(
          loc, "batch_norm_infer", adaptor.getInput(),
          {adaptor.getScale(), adaptor.getOffset(), adaptor.getMean(), adaptor.getVariance()},
          {"scale", "offset", "mean", "variance"}, adaptor.getEpsilonAttr())))
    return failure();
  results.push_back(adaptor.getInput().getType());
  return success();
}

// Binary and unary ops take their shape rule from SameOperandsAndResultType (generated).

//===--- shape -------------------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  auto error = [&](const std::string& message) {
    return emitOpError() << message << " (input " << in << ", result " << out << ", dims "
                         << str(dims) << ")";
  };
  if (in.getElementType() != out.getElementType())
    return error("element types of input and result differ");
  if (static_cast<int64_t>(dims.size()) != in.getRank())
    return error("dims must name one result dim per input dim");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= out.getRank()) return error("dim out of range");
    if (i && dims[i] <= dims[i - 1]) return error("dims must be increasing");
    if (in.getDimSize(i) != 1 && in.getDimSize(i) != out.getDimSize(dims[i]))
      return error("input dim " + std::to_string(i) + " must be 1 or equal result dim " +
                   std::to_string(dims[i]));
  }
  return success();
}

//===--- elementwise folders -----------------------------------------------------------------===//

namespace {

std::optional<double> splatValue(Attribute attr) {
  auto splat = llvm::dyn_cast_or_null<SplatElementsAttr>(attr);
  if (!splat || !llvm::isa<FloatType>(splat.getElementType())) return std::nullopt;
  return splat.getSplatValue<APFloat>().convertToDouble();
}

// Two splat operands fold to a splat of `combine`; `identity` on the right (or, for commutative
// ops, on the left) folds to the other operand.
template <typename Op, typename Combine>
OpFoldResult foldBinary(Op op, Attribute lhs, Attribute rhs, Combine combine,
                        std::optional<double> identity, bool commutative) {
  auto a = splatValue(lhs), b = splatValue(rhs);
  auto type = llvm::cast<RankedTensorType>(op.getType());
  if (a && b)
    return SplatElementsAttr::get(type, FloatAttr::get(type.getElementType(), combine(*a, *b)));
  if (identity && b == identity) return op.getLhs();
  if (identity && commutative && a == identity) return op.getRhs();
  return {};
}

}  // namespace

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(), std::plus<>(), 0.0, true);
}
OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(), std::minus<>(), 0.0, false);
}
OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(), std::multiplies<>(), 1.0, true);
}
OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(), std::divides<>(), 1.0, false);
}
// x^1 is x (NaN included).
OpFoldResult PowOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(), [](double x, double y) { return std::pow(x, y); }, 1.0,
                    false);
}
// A NaN operand wins, as the kernels' nanMax / nanMin (runtime/base/NanRules.h).
OpFoldResult MaxOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(),
                    [](double x, double y) { return (x > y || x != x) ? x : y; }, std::nullopt, true);
}
OpFoldResult MinOp::fold(FoldAdaptor adaptor) {
  return foldBinary(*this, adaptor.getLhs(), adaptor.getRhs(),
                    [](double x, double y) { return (x < y || x != x) ? x : y; }, std::nullopt, true);
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) return getInput();
  if (auto splat = llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
}

LogicalResult ConvertOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getShape() != out.getShape())
    return fail(getLoc(), "convert", "the result " + str(out) + " must have the input's shape " + str(in) +
                                         "; convert changes only the element type");
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "element types of " << in << " and " << out << " differ";
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << in << " (" << in.getNumElements()
                         << " elements) to " << out << " (" << out.getNumElements()
                         << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) return getInput();
  if (auto dense = llvm::dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  if (auto previous = getInput().getDefiningOp<ReshapeOp>()) {
    getInputMutable().assign(previous.getInput());
    return getResult();
  }
  return {};
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                        SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "slice", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  ArrayRef<int64_t> start = adaptor.getStart(), limit = adaptor.getLimit();
  if (int64_t(start.size()) != in->getRank() || int64_t(limit.size()) != in->getRank())
    return fail(loc, "slice", "start " + str(start) + " and limit " + str(limit) + " need one entry per dim of " +
                                  str(*in));
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in->getRank(); ++d) {
    if (start[d] < 0 || start[d] > limit[d] || limit[d] > in->getDimSize(d))
      return fail(loc, "slice", "dim " + std::to_string(d) + ": [" + std::to_string(start[d]) + ", " +
                                    std::to_string(limit[d]) + ") is not inside [0, " +
                                    std::to_string(in->getDimSize(d)) + ") of " + str(*in));
    shape.push_back(limit[d] - start[d]);
  }
  results.push_back(RankedTensorType::get(shape, in->getElementType()));
  return success();
}

LogicalResult PadOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                      SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "pad", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  ArrayRef<int64_t> low = adaptor.getLow(), high = adaptor.getHigh();
  if (int64_t(low.size()) != in->getRank() || int64_t(high.size()) != in->getRank())
    return fail(loc, "pad", "low " + str(low) + " and high " + str(high) + " need one entry per dim of " + str(*in));
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in->getRank(); ++d) {
    if (low[d] < 0 || high[d] < 0)
      return fail(loc, "pad", "padding must be non-negative, got low " + str(low) + ", high " + str(high) +
                                  " (use slice to crop)");
    shape.push_back(low[d] + in->getDimSize(d) + high[d]);
  }
  results.push_back(RankedTensorType::get(shape, in->getElementType()));
  return success();
}

LogicalResult ConcatenateOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                              SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "concatenate";
  if (adaptor.getInputs().empty()) return fail(loc, op, "needs at least one input");
  auto first = expectTensor(loc, op, "input 0", adaptor.getInputs()[0], -1);
  if (failed(first)) return failure();
  int64_t axis = adaptor.getAxis(), rank = first->getRank();
  if (axis < 0 || axis >= rank)
    return fail(loc, op, "axis " + std::to_string(axis) + " is out of range for " + str(*first));
  SmallVector<int64_t> shape(first->getShape());
  shape[axis] = 0;
  for (auto [i, value] : llvm::enumerate(adaptor.getInputs())) {
    auto type = expectTensor(loc, op, "input " + std::to_string(i), value, rank, first->getElementType());
    if (failed(type)) return failure();
    for (int64_t d = 0; d < rank; ++d)
      if (d != axis && type->getDimSize(d) != first->getDimSize(d))
        return fail(loc, op, "input " + std::to_string(i) + " " + str(*type) + " differs from input 0 " +
                                 str(*first) + " in dim " + std::to_string(d) + " (only dim " +
                                 std::to_string(axis) + " may differ)");
    shape[axis] += type->getDimSize(axis);
  }
  results.push_back(RankedTensorType::get(shape, first->getElementType()));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "transpose", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  ArrayRef<int64_t> perm = adaptor.getPerm();
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  SmallVector<int64_t> identity(in->getRank());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    return fail(loc, "transpose", "perm " + str(perm) + " is not a permutation of the " +
                                      std::to_string(in->getRank()) + " dims of " + str(*in));
  SmallVector<int64_t> shape;
  for (int64_t axis : perm) shape.push_back(in->getDimSize(axis));
  results.push_back(RankedTensorType::get(shape, in->getElementType()));
  return success();
}

OpFoldResult TransposeOp::fold(FoldAdaptor) {
  ArrayRef<int64_t> perm = getPerm();
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return {};
  return getInput();
}

//===--- pooling and normalizing along an axis -----------------------------------------------===//

namespace {

template <typename Adaptor>
LogicalResult inferAxisNormalize(OptLoc loc, StringRef op, Adaptor adaptor,
                                 SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, op, "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  int64_t axis = adaptor.getAxis();
  if (in->getRank() == 0 || axis < 0 || axis >= in->getRank())
    return fail(loc, op, "axis " + std::to_string(axis) + " is out of range for " + str(*in) +
                             " (negative axes are resolved by the DSL before the op is built)");
  results.push_back(*in);
  return success();
}

}  // namespace

LogicalResult ReduceWindowOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& results) {
  if (adaptor.getReduction() == Reduction::Min)
    return fail(loc, "reduce_window", "min is not a window reduction (max, sum or mean); take "
                                      "-reduce_window(max, -x)");
  auto in = expectTensor(loc, "reduce_window", "input (N, C, H, W)", adaptor.getInput(), 4);
  if (failed(in)) return failure();
  auto out = windowOutputShape(loc, "reduce_window", *in, adaptor.getWindow(), adaptor.getStride(),
                               adaptor.getPadding(), adaptor.getDilation());
  if (failed(out)) return failure();
  results.push_back(RankedTensorType::get(*out, in->getElementType()));
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& results) {
  return inferAxisNormalize(loc, "softmax", adaptor, results);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& results) {
  return inferAxisNormalize(loc, "log_softmax", adaptor, results);
}

//===--- embedding ---------------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "embedding";
  auto table = expectTensor(loc, op, "table [V, D]", adaptor.getTable(), 2);
  if (failed(table)) return failure();
  auto ids = expectTensor(loc, op, "ids", adaptor.getIds(), -1);
  if (failed(ids)) return failure();
  SmallVector<int64_t> shape(ids->getShape());
  shape.push_back(table->getDimSize(1));
  results.push_back(RankedTensorType::get(shape, table->getElementType()));
  return success();
}

//===--- take_along_axis ---------------------------------------------------------------------===//

LogicalResult TakeAlongAxisOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "take_along_axis";
  auto in = expectTensor(loc, op, "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  auto indices = expectTensor(loc, op, "indices", adaptor.getIndices(), -1);
  if (failed(indices)) return failure();
  const int64_t axis = adaptor.getAxis();
  if (in->getRank() == 0) return fail(loc, op, "input must have an axis to take along, got a scalar " + str(*in));
  if (failed(checkAxes(loc, op, {axis}, in->getRank()))) return failure();
  if (indices->getRank() != in->getRank())
    return fail(loc, op, "indices " + str(*indices) + " must have input " + str(*in) + "'s rank " +
                             std::to_string(in->getRank()) + " (add size-1 axes: reshape them)");
  for (int64_t d = 0; d < in->getRank(); ++d)
    if (d != axis && indices->getDimSize(d) != in->getDimSize(d))
      return fail(loc, op, "indices " + str(*indices) + " and input " + str(*in) + " differ on axis " +
                               std::to_string(d) + ", which is not the axis taken along (" + std::to_string(axis) +
                               "): broadcast the indices to input's size there");
  results.push_back(RankedTensorType::get(indices->getShape(), in->getElementType()));
  return success();
}

//===--- scatter, scatter_reduce --------------------------------------------------------------===//

namespace {

// The result of writing `updates` into `input` at `indices` along `axis`: input's type, once
// indices and updates have one shape, of input's rank and sizes off the axis.
LogicalResult inferScatter(OptLoc loc, StringRef op, Value input, Value indices, Value updates, int64_t axis,
                           SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, op, "input", input, -1);
  if (failed(in)) return failure();
  auto at = expectTensor(loc, op, "indices", indices, -1);
  if (failed(at)) return failure();
  auto up = expectTensor(loc, op, "updates", updates, -1);
  if (failed(up)) return failure();
  if (in->getRank() == 0) return fail(loc, op, "input must have an axis to scatter along, got a scalar " + str(*in));
  if (failed(checkAxes(loc, op, {axis}, in->getRank()))) return failure();
  if (up->getShape() != at->getShape() || up->getElementType() != in->getElementType())
    return fail(loc, op, "updates " + str(*up) + " must have the shape of indices " + str(*at) +
                             " and the element type of input " + str(*in));
  if (at->getRank() != in->getRank())
    return fail(loc, op, "indices " + str(*at) + " must have input " + str(*in) + "'s rank " +
                             std::to_string(in->getRank()) + " (add size-1 axes: reshape them)");
  for (int64_t d = 0; d < in->getRank(); ++d)
    if (d != axis && at->getDimSize(d) != in->getDimSize(d))
      return fail(loc, op, "indices " + str(*at) + " and input " + str(*in) + " differ on axis " +
                               std::to_string(d) + ", which is not the axis scattered along (" + std::to_string(axis) +
                               "): broadcast the indices and updates to input's size there");
  results.push_back(RankedTensorType::get(in->getShape(), in->getElementType()));
  return success();
}

}  // namespace

LogicalResult ScatterOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor, SmallVectorImpl<Type>& results) {
  const int64_t axis = adaptor.getAxis();
  return inferScatter(loc, "scatter", adaptor.getInput(), adaptor.getIndices(), adaptor.getUpdates(), axis, results);
}

LogicalResult ScatterReduceOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& results) {
  const Reduction reduction = adaptor.getReduction();
  if (reduction != Reduction::Max && reduction != Reduction::Min)
    return fail(loc, "scatter_reduce", std::string("reduction must be max or min, got ") +
                                           (reduction == Reduction::Sum ? "sum: a sum is scatter-add, spmd::scatterAdd"
                                                                        : "mean, which it does not take"));
  const int64_t axis = adaptor.getAxis();
  return inferScatter(loc, "scatter_reduce", adaptor.getInput(), adaptor.getIndices(), adaptor.getUpdates(), axis,
                      results);
}

LogicalResult SegmentReduceOp::verify() {
  auto data = getData().getType(), ids = getSegmentIds().getType(), result = getResult().getType();
  const Reduction reduction = getReduction();
  if (reduction != Reduction::Max && reduction != Reduction::Min)
    return fail(getLoc(), "segment_reduce", "reduction must be max or min (segment sums are embedding_backward)");
  if (data.getRank() != 2 || ids.getRank() != 1 || ids.getDimSize(0) != data.getDimSize(0) || result.getRank() != 2 ||
      result.getDimSize(1) != data.getDimSize(1) || result.getElementType() != data.getElementType())
    return fail(getLoc(), "segment_reduce", "data " + str(data) + " must be [N, W] with segment_ids " + str(ids) +
                                                 " [N], and the result " + str(result) + " [segments, W] of data's type");
  return success();
}

//===--- random numbers ----------------------------------------------------------------------===//

namespace {

LogicalResult expectKey(OptLoc loc, StringRef op, Value key) {
  auto type = expectTensor(loc, op, "key", key, 1, IntegerType::get(key.getContext(), 32));
  if (failed(type)) return failure();
  if (type->getDimSize(0) != 2)
    return fail(loc, op, "key must be tensor<2xi32> (from spmd::random::key), got " + str(*type));
  return success();
}

}  // namespace

LogicalResult RandomUniformOp::verify() { return expectKey(getLoc(), "random_uniform", getKey()); }

LogicalResult RandomFoldInOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                               SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "random_fold_in";
  if (failed(expectKey(loc, op, adaptor.getKey())) ||
      failed(expectTensor(loc, op, "data (a scalar)", adaptor.getData(), 0)))
    return failure();
  results.push_back(adaptor.getKey().getType());
  return success();
}

//===--- reductions --------------------------------------------------------------------------===//

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& results) {
  return inferReduction(loc, "reduce_sum", adaptor, results);
}
LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                             SmallVectorImpl<Type>& results) {
  return inferReduction(loc, "reduce_mean", adaptor, results);
}
LogicalResult ReduceMaxOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& results) {
  return inferReduction(loc, "reduce_max", adaptor, results);
}

LogicalResult ArgmaxOp::inferReturnTypes(MLIRContext* context, OptLoc loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "argmax", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  int64_t axis = adaptor.getAxis();
  if (failed(checkAxes(loc, "argmax", {axis}, in->getRank()))) return failure();
  if (in->getDimSize(axis) == 0)
    return fail(loc, "argmax", "axis " + std::to_string(axis) + " of " + str(*in) +
                                   " is empty: an empty axis has no largest element (as in torch and numpy)");
  results.push_back(RankedTensorType::get(dropAxes(in->getShape(), {axis}),
                                          IntegerType::get(context, 32)));
  return success();
}

LogicalResult ArgsortOp::inferReturnTypes(MLIRContext* context, OptLoc loc, Adaptor adaptor,
                                          SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "argsort", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  const int64_t axis = adaptor.getAxis();
  if (failed(checkAxes(loc, "argsort", {axis}, in->getRank()))) return failure();
  results.push_back(RankedTensorType::get(in->getShape(), IntegerType::get(context, 32)));
  return success();
}

//===--- dense layers and losses ------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "matmul";
  auto lhs = expectTensor(loc, op, "lhs", adaptor.getLhs(), -1);
  if (failed(lhs)) return failure();
  int64_t rank = lhs->getRank();
  if (rank != 2 && rank != 3)
    return fail(loc, op, "lhs must be [M, K] or batched [B, M, K], got " + str(*lhs));
  auto rhs = expectTensor(loc, op, "rhs", adaptor.getRhs(), rank, lhs->getElementType());
  if (failed(rhs)) return failure();
  if (rank == 3 && lhs->getDimSize(0) != rhs->getDimSize(0))
    return fail(loc, op, "batch dims differ: lhs " + str(*lhs) + ", rhs " + str(*rhs));
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  int64_t r = rank - 2;  // the first matrix dim
  int64_t m = lhs->getDimSize(r + (tl ? 1 : 0)), k = lhs->getDimSize(r + (tl ? 0 : 1));
  int64_t k2 = rhs->getDimSize(r + (tr ? 1 : 0)), n = rhs->getDimSize(r + (tr ? 0 : 1));
  if (k != k2)
    return fail(loc, op, "contracting dims differ: lhs " + str(*lhs) +
                             (tl ? " (transposed)" : "") + " gives " + std::to_string(k) +
                             ", rhs " + str(*rhs) + (tr ? " (transposed)" : "") + " gives " +
                             std::to_string(k2));
  if (adaptor.getBias() &&
      failed(expectPerChannel(loc, op, "bias", adaptor.getBias(), n, lhs->getElementType())))
    return failure();
  SmallVector<int64_t> shape{m, n};
  if (rank == 3) shape.insert(shape.begin(), lhs->getDimSize(0));
  results.push_back(RankedTensorType::get(shape, lhs->getElementType()));
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                      SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "softmax_cross_entropy";
  auto logits = expectTensor(loc, op, "logits [N, C]", adaptor.getLogits(), 2);
  if (failed(logits)) return failure();
  auto labels = expectTensor(loc, op, "labels [N]", adaptor.getLabels(), 1);
  if (failed(labels)) return failure();
  if (labels->getDimSize(0) != logits->getDimSize(0))
    return fail(loc, op, "labels " + str(*labels) + " must have one entry per row of logits " +
                             str(*logits));
  results.push_back(RankedTensorType::get({logits->getDimSize(0)}, logits->getElementType()));
  return success();
}

}  // namespace spmd::ir
