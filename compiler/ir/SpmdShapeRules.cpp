// Shape rules of the `spmd` ops: result types from operands and attributes. Each rule also
// verifies its op, naming the op, the offending shapes and how to fix them.
#include <numeric>
#include <string>

#include "compiler/ir/SpmdDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace spmd::ir {
namespace {

using OptLoc = std::optional<Location>;

std::string str(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::string str(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

LogicalResult fail(OptLoc loc, StringRef op, const std::string& message) {
  return emitOptionalError(loc, "spmd.", op, ": ", message);
}

RankedTensorType ranked(Value value) {
  return value ? llvm::dyn_cast<RankedTensorType>(value.getType()) : RankedTensorType();
}

// Checks `value` is a ranked tensor of the given rank (any rank if -1) and element type (any if
// null); names the operand in the error.
FailureOr<RankedTensorType> expectTensor(OptLoc loc, StringRef op, StringRef what, Value value,
                                         int64_t rank, Type element = {}) {
  RankedTensorType type = ranked(value);
  if (!type) return fail(loc, op, (what + " must be a ranked tensor").str());
  if (rank >= 0 && type.getRank() != rank)
    return fail(loc, op, (what + " must have rank " + Twine(rank) + ", got " + str(type)).str());
  if (element && type.getElementType() != element)
    return fail(loc, op, (what + " has element type " + str(type.getElementType()) +
                          " but must match " + str(element))
                             .str());
  return type;
}

LogicalResult expectPerChannel(OptLoc loc, StringRef op, StringRef what, Value value,
                               int64_t channels, Type element) {
  auto type = expectTensor(loc, op, what, value, 1, element);
  if (failed(type)) return failure();
  if (type->getDimSize(0) != channels)
    return fail(loc, op, (what + " " + str(*type) + " must have one entry per channel (" +
                          Twine(channels) + ")")
                             .str());
  return success();
}

// Axes must be unique, sorted and inside [0, rank).
LogicalResult checkAxes(OptLoc loc, StringRef op, ArrayRef<int64_t> axes, int64_t rank) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return fail(loc, op, "axis " + std::to_string(axes[i]) + " is out of range for rank " +
                               std::to_string(rank));
    if (i && axes[i] <= axes[i - 1])
      return fail(loc, op, "axes " + str(axes) + " must be sorted and unique");
  }
  return success();
}

SmallVector<int64_t> dropAxes(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (!llvm::is_contained(axes, i)) kept.push_back(shape[i]);
  return kept;
}

LogicalResult inferBatchNorm(OptLoc loc, StringRef op, Value input, ValueRange perChannel,
                             ArrayRef<StringRef> names, FloatAttr epsilon) {
  auto in = expectTensor(loc, op, "input", input, -1);
  if (failed(in)) return failure();
  if (in->getRank() != 2 && in->getRank() != 4)
    return fail(loc, op, "input must be [N, C] or [N, C, H, W], got " + str(*in));
  for (auto [value, name] : llvm::zip(perChannel, names))
    if (failed(expectPerChannel(loc, op, name, value, in->getDimSize(1), in->getElementType())))
      return failure();
  if (!epsilon || epsilon.getValueAsDouble() <= 0)
    return fail(loc, op, "epsilon must be a positive float");
  return success();
}

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

//===--- convolution and normalization -------------------------------------------------------===//

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "conv2d";
  auto in = expectTensor(loc, op, "input (N, C, H, W)", adaptor.getInput(), 4);
  if (failed(in)) return failure();
  auto filter = expectTensor(loc, op, "filter (O, I, KH, KW)", adaptor.getFilter(), 4,
                             in->getElementType());
  if (failed(filter)) return failure();
  if (in->getDimSize(1) != filter->getDimSize(1))
    return fail(loc, op, "input " + str(*in) + " has " + std::to_string(in->getDimSize(1)) +
                             " channels but filter " + str(*filter) + " expects " +
                             std::to_string(filter->getDimSize(1)));
  if (adaptor.getBias() && failed(expectPerChannel(loc, op, "bias", adaptor.getBias(),
                                                   filter->getDimSize(0), in->getElementType())))
    return failure();
  ArrayRef<int64_t> stride = adaptor.getStride(), padding = adaptor.getPadding();
  if (stride.size() != 2 || stride[0] < 1 || stride[1] < 1)
    return fail(loc, op, "stride must be two positive integers, got " + str(stride));
  if (padding.size() != 2 || padding[0] < 0 || padding[1] < 0)
    return fail(loc, op, "padding must be two non-negative integers, got " + str(padding));
  SmallVector<int64_t> out{in->getDimSize(0), filter->getDimSize(0), 0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t padded = in->getDimSize(2 + i) + 2 * padding[i];
    if (padded < filter->getDimSize(2 + i))
      return fail(loc, op, "filter " + str(*filter) + " is larger than the padded input " +
                               str(*in) + " (padding " + str(padding) + ")");
    out[2 + i] = (padded - filter->getDimSize(2 + i)) / stride[i] + 1;
  }
  results.push_back(RankedTensorType::get(out, in->getElementType()));
  return success();
}

LogicalResult BatchNormTrainOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                 SmallVectorImpl<Type>& results) {
  if (failed(inferBatchNorm(loc, "batch_norm_train", adaptor.getInput(),
                            {adaptor.getScale(), adaptor.getOffset()}, {"scale", "offset"},
                            adaptor.getEpsilonAttr())))
    return failure();
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

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType()) return getInput();
  if (auto splat = llvm::dyn_cast_or_null<SplatElementsAttr>(adaptor.getInput()))
    return SplatElementsAttr::get(getType(), splat.getSplatValue<Attribute>());
  return {};
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
  results.push_back(RankedTensorType::get(dropAxes(in->getShape(), {axis}),
                                          IntegerType::get(context, 32)));
  return success();
}

//===--- dense layers and losses ------------------------------------------------------------===//

LogicalResult MatmulOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                         SmallVectorImpl<Type>& results) {
  constexpr StringRef op = "matmul";
  auto lhs = expectTensor(loc, op, "lhs", adaptor.getLhs(), 2);
  if (failed(lhs)) return failure();
  auto rhs = expectTensor(loc, op, "rhs", adaptor.getRhs(), 2, lhs->getElementType());
  if (failed(rhs)) return failure();
  bool tl = adaptor.getTransposeLhs(), tr = adaptor.getTransposeRhs();
  int64_t m = lhs->getDimSize(tl ? 1 : 0), k = lhs->getDimSize(tl ? 0 : 1);
  int64_t k2 = rhs->getDimSize(tr ? 1 : 0), n = rhs->getDimSize(tr ? 0 : 1);
  if (k != k2)
    return fail(loc, op, "contracting dims differ: lhs " + str(*lhs) +
                             (tl ? " (transposed)" : "") + " gives " + std::to_string(k) +
                             ", rhs " + str(*rhs) + (tr ? " (transposed)" : "") + " gives " +
                             std::to_string(k2));
  if (adaptor.getBias() &&
      failed(expectPerChannel(loc, op, "bias", adaptor.getBias(), n, lhs->getElementType())))
    return failure();
  results.push_back(RankedTensorType::get({m, n}, lhs->getElementType()));
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
