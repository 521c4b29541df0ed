// The DSL's op functions: each records one `spmd` op (plus explicit broadcasts) in the current
// trace at the caller's source line.
#include "frontend/Ops.h"

#include <algorithm>
#include <limits>

#include "ir/SpmdDialect.h"
#include "frontend/Checks.h"
#include "frontend/Trace.h"
#include "frontend/Indexing.h"

namespace spmd {

using detail::Trace;
using detail::checkedAxis;
using detail::where;
namespace ir = spmd::ir;

namespace {

// NumPy broadcasting of two shapes; throws naming both.
Shape broadcastShape(const Tensor& a, const Tensor& b, const char* op, Loc loc) {
  size_t rank = std::max(a.shape().size(), b.shape().size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.shape().size() ? 1 : a.shape()[i - (rank - a.shape().size())];
    int64_t db = i < rank - b.shape().size() ? 1 : b.shape()[i - (rank - b.shape().size())];
    if (da != db && da != 1 && db != 1)
      throw Error(where(loc) + ": spmd::" + op + ": shapes " + shapeString(a.shape()) + " and " +
                  shapeString(b.shape()) + " do not broadcast (dim " + std::to_string(i) +
                  ": " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    out[i] = da == 1 ? db : da;  // 1 against 0 is 0, as NumPy's
  }
  return out;
}

template <typename OpTy>
Tensor binary(const Tensor& a, const Tensor& b, const char* name, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  if (a.dtype() != b.dtype())
    throw Error(where(loc) + ": spmd::" + name + ": dtypes differ (" + a.typeString() + " vs " +
                b.typeString() + "); convert one operand first");
  Shape shape = broadcastShape(a, b, name, loc);
  Tensor x = broadcastTo(a, shape, loc), y = broadcastTo(b, shape, loc);
  return trace.wrap(
      trace.create<OpTy>(loc, trace.valueOf(x, loc), trace.valueOf(y, loc))->getResult(0));
}

template <typename OpTy>
Tensor unary(const Tensor& x, const char* name, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  return trace.wrap(trace.create<OpTy>(loc, trace.valueOf(x, loc))->getResult(0));
}

template <typename OpTy>
Tensor reduction(const Tensor& x, std::vector<int64_t> axes, const char* name, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  for (int64_t& axis : axes) axis = checkedAxis(x, axis, name, loc);
  for (size_t i = 0; i < axes.size(); ++i)
    if (std::count(axes.begin(), axes.begin() + std::ptrdiff_t(i), axes[i]))
      throw Error(where(loc) + ": spmd::" + name + ": axis " + std::to_string(axes[i]) + " of " + x.typeString() +
                  " is named twice in the axes; name each axis once");
  std::sort(axes.begin(), axes.end());
  return trace.wrap(trace.create<OpTy>(loc, trace.valueOf(x, loc), axes)->getResult(0));
}

mlir::Value optional(Trace& trace, const Tensor& t, Loc loc) {
  return t.defined() ? trace.valueOf(t, loc) : mlir::Value();
}

// A convolution's dilation and groups attributes; the defaults (1) stay absent from the IR (and a
// Program), as they were before the options existed.
std::pair<mlir::DenseI64ArrayAttr, mlir::IntegerAttr> convOptionAttrs(mlir::MLIRContext* context,
                                                                     const std::vector<int64_t>& dilation,
                                                                     int64_t groups) {
  return {dilation != std::vector<int64_t>{1, 1} ? mlir::DenseI64ArrayAttr::get(context, dilation)
                                                 : mlir::DenseI64ArrayAttr(),
          groups != 1 ? mlir::IntegerAttr::get(mlir::IntegerType::get(context, 64), groups) : mlir::IntegerAttr()};
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& filter, const Tensor& bias,
              const Conv2dOptions& options, Loc loc) {
  Trace& trace = Trace::current("conv2d", loc);
  mlir::MLIRContext* context = &trace.context();
  const auto [dilation, groups] = convOptionAttrs(context, options.dilation, options.groups);
  return trace.wrap(trace
                        .create<ir::Conv2dOp>(loc, trace.valueOf(x, loc), trace.valueOf(filter, loc),
                                              optional(trace, bias, loc),
                                              mlir::DenseI64ArrayAttr::get(context, options.stride),
                                              mlir::DenseI64ArrayAttr::get(context, options.padding),
                                              mlir::BoolAttr::get(context, false), dilation, groups)
                        ->getResult(0));
}

Tensor convTranspose2d(const Tensor& x, const Tensor& filter, const Tensor& bias, const ConvTranspose2dOptions& options,
                       Loc loc) {
  Trace& trace = Trace::current("convTranspose2d", loc);
  const std::string at = where(loc) + ": spmd::convTranspose2d: ";
  if (x.rank() != 4 || filter.rank() != 4)
    throw Error(at + "x must be [N, I, H, W] and filter [I, O / groups, KH, KW], got " + x.typeString() + " and " +
                filter.typeString());
  const ConvTranspose2dOptions& o = options;
  auto pair = [](const std::vector<int64_t>& v, int64_t least) {
    return v.size() == 2 && v[0] >= least && v[1] >= least;
  };
  if (!pair(o.stride, 1) || !pair(o.dilation, 1) || !pair(o.padding, 0) || !pair(o.outputPadding, 0))
    throw Error(at + "stride and dilation must be two positive integers, padding and outputPadding two non-negative ones");
  if (filter.dim(0) != x.dim(1))
    throw Error(at + "filter " + filter.typeString() + " must have x's " + std::to_string(x.dim(1)) +
                " input channels first ([I, O / groups, KH, KW], torch's layout for a transposed convolution)");
  if (o.groups < 1 || x.dim(1) % o.groups != 0)
    throw Error(at + "groups " + std::to_string(o.groups) + " must be positive and divide x's " +
                std::to_string(x.dim(1)) + " channels");
  Shape result = {x.dim(0), filter.dim(1) * o.groups, 0, 0};
  for (size_t d = 0; d < 2; ++d) {
    if (o.outputPadding[d] >= o.stride[d])
      throw Error(at + "outputPadding " + shapeString(o.outputPadding) + " must be smaller than the stride " +
                  shapeString(o.stride) + " (it picks among the sizes a strided convolution maps to x's)");
    result[d + 2] = (x.dim(int(d) + 2) - 1) * o.stride[d] - 2 * o.padding[d] + o.dilation[d] * (filter.dim(int(d) + 2) - 1) +
                    o.outputPadding[d] + 1;
    if (result[d + 2] < 1)
      throw Error(at + "the padding " + shapeString(o.padding) + " leaves no output of " + x.typeString() +
                  " and filter " + filter.typeString());
  }
  if (bias.defined() && bias.shape() != Shape{result[1]})
    throw Error(at + "bias must be [" + std::to_string(result[1]) + "] (one per output channel), got " +
                bias.typeString());
  mlir::MLIRContext* context = &trace.context();
  const auto [dilation, groups] = convOptionAttrs(context, o.dilation, o.groups);
  Tensor y = trace.wrap(trace
                            .createWithType<ir::Conv2dBackwardDataOp>(
                                loc, detail::tensorType(x.dtype(), result), trace.valueOf(x, loc),
                                trace.valueOf(filter, loc), mlir::DenseI64ArrayAttr::get(context, o.stride),
                                mlir::DenseI64ArrayAttr::get(context, o.padding), dilation, groups)
                            ->getResult(0));
  return bias.defined() ? add(y, reshape(bias, {1, result[1], 1, 1}, loc), loc) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& filter, const Tensor& bias, const Conv1dOptions& options, Loc loc) {
  if (x.rank() != 3 || filter.rank() != 3)
    throw Error(where(loc) + ": spmd::conv1d: x must be [N, C, L] and filter [O, C / groups, K], got " +
                x.typeString() + " and " + filter.typeString());
  const Shape xs = x.shape(), ws = filter.shape();
  Tensor y = conv2d(reshape(x, {xs[0], xs[1], 1, xs[2]}, loc), reshape(filter, {ws[0], ws[1], 1, ws[2]}, loc), bias,
                    {{1, options.stride}, {0, options.padding}, {1, options.dilation}, options.groups}, loc);
  return reshape(y, {y.dim(0), y.dim(1), y.dim(3)}, loc);
}

BatchNormResult batchNormTrain(const Tensor& x, const Tensor& scale, const Tensor& offset,
                               double epsilon, const Tensor& mask, Loc loc) {
  Trace& trace = Trace::current("batchNormTrain", loc);
  mlir::Operation* op = trace.create<ir::BatchNormTrainOp>(
      loc, trace.valueOf(x, loc), trace.valueOf(scale, loc), trace.valueOf(offset, loc),
      optional(trace, mask, loc), llvm::APFloat(epsilon));
  return {trace.wrap(op->getResult(0)), trace.wrap(op->getResult(1)),
          trace.wrap(op->getResult(2))};
}

Tensor batchNormInfer(const Tensor& x, const Tensor& scale, const Tensor& offset,
                      const Tensor& mean, const Tensor& variance, double epsilon, Loc loc) {
  Trace& trace = Trace::current("batchNormInfer", loc);
  return trace.wrap(trace
                        .create<ir::BatchNormInferOp>(
                            loc, trace.valueOf(x, loc), trace.valueOf(scale, loc),
                            trace.valueOf(offset, loc), trace.valueOf(mean, loc),
                            trace.valueOf(variance, loc), llvm::APFloat(epsilon))
                        ->getResult(0));
}

namespace {

// A pooling op of the DSL as the dialect's one window reduction.
Tensor pool(const Tensor& x, const Pool2dOptions& options, ir::Reduction reduction, const char* name, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  const std::vector<int64_t>& stride = options.stride.empty() ? options.window : options.stride;
  return trace.wrap(trace
                        .create<ir::ReduceWindowOp>(loc, trace.valueOf(x, loc), reduction, options.window, stride,
                                                    options.padding, options.dilation, options.countIncludePad)
                        ->getResult(0));
}

template <typename OpTy>
Tensor alongAxis(const Tensor& x, int64_t axis, const char* name, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  axis = checkedAxis(x, axis, name, loc);
  return trace.wrap(trace.create<OpTy>(loc, trace.valueOf(x, loc), axis)->getResult(0));
}

}  // namespace

Tensor maxPool2d(const Tensor& x, const Pool2dOptions& options, Loc loc) {
  return pool(x, options, ir::Reduction::Max, "maxPool2d", loc);
}
Tensor avgPool2d(const Tensor& x, const Pool2dOptions& options, Loc loc) {
  return pool(x, options, ir::Reduction::Mean, "avgPool2d", loc);
}
Tensor softmax(const Tensor& x, int64_t axis, Loc loc) {
  return alongAxis<ir::SoftmaxOp>(x, axis, "softmax", loc);
}
Tensor logSoftmax(const Tensor& x, int64_t axis, Loc loc) {
  return alongAxis<ir::LogSoftmaxOp>(x, axis, "logSoftmax", loc);
}

Tensor layerNorm(const Tensor& x, const Tensor& scale, const Tensor& offset, double epsilon, Loc loc) {
  if (x.rank() < 1 || scale.shape() != Shape{x.shape().back()} || offset.shape() != scale.shape())
    throw Error(where(loc) + ": spmd::layerNorm: scale and offset must be [" +
                std::to_string(x.rank() ? x.shape().back() : 0) + "] (the last axis of " + x.typeString() +
                "), got " + scale.typeString() + " and " + offset.typeString());
  if (!(epsilon > 0)) throw Error(where(loc) + ": spmd::layerNorm: epsilon must be positive");
  Shape kept = x.shape();
  kept.back() = 1;
  Tensor centered = sub(x, reshape(mean(x, {-1}, loc), kept, loc), loc);
  Tensor variance = reshape(mean(mul(centered, centered, loc), {-1}, loc), kept, loc);
  Tensor normalized = div(centered, sqrt(add(variance, epsilon, loc), loc), loc);
  return add(mul(normalized, scale, loc), offset, loc);
}

Tensor groupNorm(const Tensor& x, int64_t groups, const Tensor& scale, const Tensor& offset, double epsilon,
                 Loc loc) {
  if (x.rank() < 2)
    throw Error(where(loc) + ": spmd::groupNorm: x must be [N, C, ...] (rank 2 or more), got " + x.typeString());
  const int64_t channels = x.dim(1);
  if (groups < 1 || channels % groups != 0)
    throw Error(where(loc) + ": spmd::groupNorm: groups must divide the " + std::to_string(channels) +
                " channels of " + x.typeString() + ", got " + std::to_string(groups));
  if (scale.shape() != Shape{channels} || offset.shape() != scale.shape())
    throw Error(where(loc) + ": spmd::groupNorm: scale and offset must be [" + std::to_string(channels) +
                "] (the channels of " + x.typeString() + "), got " + scale.typeString() + " and " +
                offset.typeString());
  if (!(epsilon > 0)) throw Error(where(loc) + ": spmd::groupNorm: epsilon must be positive");
  const int64_t n = x.dim(0);
  // Not -1: an empty batch leaves it undetermined.
  const int64_t perGroup = channels / groups * numElements(std::span(x.shape()).subspan(2));
  Tensor grouped = reshape(x, {n, groups, perGroup}, loc);
  Tensor centered = sub(grouped, reshape(mean(grouped, {-1}, loc), {n, groups, 1}, loc), loc);
  Tensor variance = reshape(mean(mul(centered, centered, loc), {-1}, loc), {n, groups, 1}, loc);
  Tensor normalized = reshape(div(centered, sqrt(add(variance, epsilon, loc), loc), loc), x.shape(), loc);
  Shape perChannel(size_t(x.rank()), 1);
  perChannel[1] = channels;
  return add(mul(normalized, reshape(scale, perChannel, loc), loc), reshape(offset, perChannel, loc), loc);
}

Tensor add(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::AddOp>(a, b, "add", loc); }
Tensor sub(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::SubOp>(a, b, "sub", loc); }
Tensor mul(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::MulOp>(a, b, "mul", loc); }
Tensor div(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::DivOp>(a, b, "div", loc); }
Tensor pow(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::PowOp>(a, b, "pow", loc); }
Tensor pow(const Tensor& a, double b, Loc loc) { return pow(a, fill(a, b, loc), loc); }
Tensor maximum(const Tensor& a, const Tensor& b, Loc loc) {
  return binary<ir::MaxOp>(a, b, "maximum", loc);
}
Tensor minimum(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::MinOp>(a, b, "minimum", loc); }
Tensor greaterEqual(const Tensor& a, const Tensor& b, Loc loc) {
  return binary<ir::GreaterEqualOp>(a, b, "greaterEqual", loc);
}
Tensor greater(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::GreaterOp>(a, b, "greater", loc); }
Tensor lessEqual(const Tensor& a, const Tensor& b, Loc loc) {
  return binary<ir::LessEqualOp>(a, b, "lessEqual", loc);
}
Tensor less(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::LessOp>(a, b, "less", loc); }
Tensor equal(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::EqualOp>(a, b, "equal", loc); }
Tensor notEqual(const Tensor& a, const Tensor& b, Loc loc) { return binary<ir::NotEqualOp>(a, b, "notEqual", loc); }
Tensor add(const Tensor& x, double c, Loc loc) { return add(x, fill(x, c, loc), loc); }
Tensor mul(const Tensor& x, double c, Loc loc) { return mul(x, fill(x, c, loc), loc); }
Tensor neg(const Tensor& x, Loc loc) { return unary<ir::NegOp>(x, "neg", loc); }
Tensor exp(const Tensor& x, Loc loc) { return unary<ir::ExpOp>(x, "exp", loc); }
Tensor log(const Tensor& x, Loc loc) { return unary<ir::LogOp>(x, "log", loc); }
Tensor sqrt(const Tensor& x, Loc loc) { return unary<ir::SqrtOp>(x, "sqrt", loc); }
Tensor relu(const Tensor& x, Loc loc) { return unary<ir::ReluOp>(x, "relu", loc); }
Tensor tanh(const Tensor& x, Loc loc) { return unary<ir::TanhOp>(x, "tanh", loc); }
Tensor sigmoid(const Tensor& x, Loc loc) { return unary<ir::SigmoidOp>(x, "sigmoid", loc); }
Tensor abs(const Tensor& x, Loc loc) { return unary<ir::AbsOp>(x, "abs", loc); }
Tensor gelu(const Tensor& x, Loc loc) { return unary<ir::GeluOp>(x, "gelu", loc); }
Tensor sin(const Tensor& x, Loc loc) { return unary<ir::SinOp>(x, "sin", loc); }
Tensor log1p(const Tensor& x, Loc loc) { return unary<ir::Log1pOp>(x, "log1p", loc); }
Tensor expm1(const Tensor& x, Loc loc) { return unary<ir::Expm1Op>(x, "expm1", loc); }
Tensor cos(const Tensor& x, Loc loc) { return unary<ir::CosOp>(x, "cos", loc); }
Tensor erf(const Tensor& x, Loc loc) { return unary<ir::ErfOp>(x, "erf", loc); }
Tensor erfinv(const Tensor& x, Loc loc) { return unary<ir::ErfinvOp>(x, "erfinv", loc); }
Tensor floor(const Tensor& x, Loc loc) { return unary<ir::FloorOp>(x, "floor", loc); }
Tensor ceil(const Tensor& x, Loc loc) { return unary<ir::CeilOp>(x, "ceil", loc); }
Tensor round(const Tensor& x, Loc loc) { return unary<ir::RoundOp>(x, "round", loc); }
Tensor sign(const Tensor& x, Loc loc) { return unary<ir::SignOp>(x, "sign", loc); }

Tensor fill(const Tensor& like, double value, Loc loc) {
  Trace& trace = Trace::current("fill", loc);
  auto type = detail::tensorType(like.dtype(), like.shape());
  mlir::Attribute scalar =
      like.dtype() == DType::i32
          ? mlir::Attribute(trace.builder().getI32IntegerAttr(static_cast<int32_t>(value)))
          : mlir::Attribute(trace.builder().getFloatAttr(type.getElementType(), value));
  auto attr = mlir::SplatElementsAttr::get(type, scalar);
  return trace.wrap(
      trace.create<ir::ConstantOp>(loc, llvm::cast<mlir::ElementsAttr>(attr))->getResult(0));
}

Tensor cast(const Tensor& x, DType dtype, Loc loc) {
  if (x.dtype() == dtype) return x;
  Trace& trace = Trace::current("cast", loc);
  return trace.wrap(trace
                        .createWithType<ir::ConvertOp>(loc, detail::tensorType(dtype, x.shape()),
                                                       trace.valueOf(x, loc))
                        ->getResult(0));
}

Tensor broadcastTo(const Tensor& x, const Shape& shape, Loc loc) {
  if (x.shape() == shape) return x;
  Trace& trace = Trace::current("broadcastTo", loc);
  const std::string at = where(loc) + ": spmd::broadcastTo: cannot broadcast " + x.typeString() + " to " + shapeString(shape);
  if (x.shape().size() > shape.size()) throw Error(at + ", a shape of lower rank");
  const size_t lead = shape.size() - x.shape().size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) throw Error(at + ": extent " + std::to_string(d) + " is negative");
    // NumPy's rule, x's dims aligned with the shape's last ones: each is 1 or the shape's.
    if (d >= lead && x.shape()[d - lead] != 1 && x.shape()[d - lead] != shape[d])
      throw Error(at + ": x's dim " + std::to_string(d - lead) + " is " + std::to_string(x.shape()[d - lead]) +
                  ", which is neither 1 nor " + std::to_string(shape[d]));
  }
  std::vector<int64_t> dims(x.shape().size());
  std::iota(dims.begin(), dims.end(), static_cast<int64_t>(lead));
  return trace.wrap(trace
                        .createWithType<ir::BroadcastInDimOp>(
                            loc, detail::tensorType(x.dtype(), shape), trace.valueOf(x, loc), dims)
                        ->getResult(0));
}

Tensor slice(const Tensor& x, std::vector<int64_t> start, std::vector<int64_t> limit, Loc loc) {
  Trace& trace = Trace::current("slice", loc);
  if (start.size() != x.shape().size() || limit.size() != x.shape().size())
    throw Error(where(loc) + ": spmd::slice: start and limit need " + std::to_string(x.rank()) +
                " entries (one per dim of " + x.typeString() + ")");
  for (size_t d = 0; d < start.size(); ++d) {
    if (start[d] < 0) start[d] += x.shape()[d];
    if (limit[d] < 0) limit[d] += x.shape()[d];
  }
  return trace.wrap(trace.create<ir::SliceOp>(loc, trace.valueOf(x, loc), start, limit)->getResult(0));
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high, Loc loc) {
  Trace& trace = Trace::current("pad", loc);
  return trace.wrap(trace.create<ir::PadOp>(loc, trace.valueOf(x, loc), low, high)->getResult(0));
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis, Loc loc) {
  Trace& trace = Trace::current("concat", loc);
  if (xs.empty()) throw Error(where(loc) + ": spmd::concat: needs at least one tensor");
  if (axis < 0) axis += xs[0].rank();
  llvm::SmallVector<mlir::Value> values;
  for (const Tensor& x : xs) values.push_back(trace.valueOf(x, loc));
  return trace.wrap(trace.create<ir::ConcatenateOp>(loc, mlir::ValueRange(values), axis)->getResult(0));
}

Tensor where(const Tensor& condition, const Tensor& onTrue, const Tensor& onFalse, Loc loc) {
  Trace& trace = Trace::current("where", loc);
  Shape values = broadcastShape(onTrue, onFalse, "where", loc);
  Shape shape = broadcastShape(condition, broadcastTo(onTrue, values, loc), "where", loc);
  if (condition.dtype() != onTrue.dtype() || onTrue.dtype() != onFalse.dtype())
    throw Error(where(loc) + ": spmd::where: dtypes differ (" + condition.typeString() + ", " + onTrue.typeString() +
                ", " + onFalse.typeString() + "); the condition is a mask of the values' float type");
  return trace.wrap(trace
                        .create<ir::SelectOp>(loc, trace.valueOf(broadcastTo(condition, shape, loc), loc),
                                              trace.valueOf(broadcastTo(onTrue, shape, loc), loc),
                                              trace.valueOf(broadcastTo(onFalse, shape, loc), loc))
                        ->getResult(0));
}

Tensor reshape(const Tensor& x, const Shape& shape, Loc loc) {
  Trace& trace = Trace::current("reshape", loc);
  Shape resolved = shape;
  if (std::count(shape.begin(), shape.end(), -1) > 1 ||
      std::any_of(shape.begin(), shape.end(), [](int64_t e) { return e < -1; }))
    throw Error(where(loc) + ": spmd::reshape: shape " + shapeString(shape) + " for " + x.typeString() +
                " must have non-negative extents, and at most one -1 (the extent inferred from the rest)");
  auto unknown = std::find(resolved.begin(), resolved.end(), -1);
  if (unknown != resolved.end()) {
    int64_t known = -numElements(resolved);  // product with the -1 counted once
    if (known <= 0 || x.numel() % known != 0)
      throw Error(where(loc) + ": spmd::reshape: cannot infer -1 in " + shapeString(shape) +
                  " for " + x.typeString());
    *unknown = x.numel() / known;
  }
  if (numElements(resolved) != x.numel())
    throw Error(where(loc) + ": spmd::reshape: " + x.typeString() + " has " +
                std::to_string(x.numel()) + " elements, shape " + shapeString(shape) + " has " +
                std::to_string(numElements(resolved)));
  return trace.wrap(trace
                        .createWithType<ir::ReshapeOp>(
                            loc, detail::tensorType(x.dtype(), resolved), trace.valueOf(x, loc))
                        ->getResult(0));
}

Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, Loc loc) {
  Trace& trace = Trace::current("transpose", loc);
  return trace.wrap(trace.create<ir::TransposeOp>(loc, trace.valueOf(x, loc), perm)->getResult(0));
}

Tensor sum(const Tensor& x, std::vector<int64_t> axes, Loc loc) {
  return reduction<ir::ReduceSumOp>(x, std::move(axes), "sum", loc);
}
Tensor mean(const Tensor& x, std::vector<int64_t> axes, Loc loc) {
  return reduction<ir::ReduceMeanOp>(x, std::move(axes), "mean", loc);
}
Tensor max(const Tensor& x, std::vector<int64_t> axes, Loc loc) {
  return reduction<ir::ReduceMaxOp>(x, std::move(axes), "max", loc);
}

Tensor stopGradient(const Tensor& x, Loc loc) {
  Trace& trace = Trace::current("stopGradient", loc);
  if (x.dtype() == DType::i32) return x;  // integers carry no gradient
  return trace.wrap(trace.create<ir::StopGradientOp>(loc, trace.valueOf(x, loc))->getResult(0));
}

Tensor argmax(const Tensor& x, int64_t axis, Loc loc) {
  Trace& trace = Trace::current("argmax", loc);
  axis = checkedAxis(x, axis, "argmax", loc);
  return trace.wrap(trace.create<ir::ArgmaxOp>(loc, trace.valueOf(x, loc), axis)->getResult(0));
}

Tensor argsort(const Tensor& x, int64_t axis, bool descending, Loc loc) {
  Trace& trace = Trace::current("argsort", loc);
  axis = checkedAxis(x, axis, "argsort", loc);
  return trace.wrap(trace.create<ir::ArgsortOp>(loc, trace.valueOf(x, loc), axis, descending)->getResult(0));
}

Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias, const MatmulOptions& options,
              Loc loc) {
  Trace& trace = Trace::current("matmul", loc);
  return trace.wrap(trace
                        .create<ir::MatmulOp>(loc, trace.valueOf(a, loc), trace.valueOf(b, loc),
                                              optional(trace, bias, loc), options.transposeLhs,
                                              options.transposeRhs)
                        ->getResult(0));
}

Tensor embedding(const Tensor& table, const Tensor& ids, Loc loc) {
  Trace& trace = Trace::current("embedding", loc);
  return trace.wrap(
      trace.create<ir::EmbeddingOp>(loc, trace.valueOf(table, loc), trace.valueOf(ids, loc))->getResult(0));
}

Tensor takeAlongAxis(const Tensor& x, const Tensor& indices, int64_t axis, Loc loc) {
  Trace& trace = Trace::current("takeAlongAxis", loc);
  if (axis < 0) axis += x.rank();
  return trace.wrap(trace.create<ir::TakeAlongAxisOp>(loc, trace.valueOf(x, loc), trace.valueOf(indices, loc), axis)
                        ->getResult(0));
}

namespace {

// A scatter's axis, counted from the front, once its operands fit (else an error at the user's line).
int64_t scatterAxis(const char* name, const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis,
                    Loc loc) {
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  const int64_t rank = x.rank();
  axis = checkedAxis(x, axis, name, loc);
  if (indices.dtype() != DType::i32)
    throw Error(at + "indices must be i32, got " + indices.typeString() + " (cast them: spmd::cast(indices, DType::i32))");
  bool fits = indices.shape() == updates.shape() && indices.rank() == rank && updates.dtype() == x.dtype();
  for (int64_t d = 0; fits && d < rank; ++d) fits = d == axis || indices.dim(d) == x.dim(d);
  if (!fits)
    throw Error(at + "indices " + indices.typeString() + " and updates " + updates.typeString() +
                " must have one shape, of x " + x.typeString() + "'s rank and its sizes on every axis but " +
                std::to_string(axis) + ", and updates x's dtype");
  return axis;
}

Tensor scatterReduce(const char* name, ir::Reduction reduction, const Tensor& x, const Tensor& indices,
                     const Tensor& updates, int64_t axis, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  axis = scatterAxis(name, x, indices, updates, axis, loc);
  return trace.wrap(trace
                        .create<ir::ScatterReduceOp>(loc, trace.valueOf(x, loc), trace.valueOf(indices, loc),
                                                     trace.valueOf(updates, loc), axis, reduction)
                        ->getResult(0));
}

}  // namespace

Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, Loc loc) {
  Trace& trace = Trace::current("scatter", loc);
  axis = scatterAxis("scatter", x, indices, updates, axis, loc);
  return trace.wrap(trace
                        .create<ir::ScatterOp>(loc, trace.valueOf(x, loc), trace.valueOf(indices, loc),
                                               trace.valueOf(updates, loc), axis)
                        ->getResult(0));
}

Tensor scatterMax(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, Loc loc) {
  return scatterReduce("scatterMax", ir::Reduction::Max, x, indices, updates, axis, loc);
}

Tensor scatterMin(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, Loc loc) {
  return scatterReduce("scatterMin", ir::Reduction::Min, x, indices, updates, axis, loc);
}

Tensor scatterAdd(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, Loc loc) {
  Trace& trace = Trace::current("scatterAdd", loc);
  axis = scatterAxis("scatterAdd", x, indices, updates, axis, loc);
  Tensor added = trace.wrap(trace
                                .createWithType<ir::TakeAlongAxisBackwardOp>(
                                    loc, detail::tensorType(x.dtype(), x.shape()), trace.valueOf(updates, loc),
                                    trace.valueOf(indices, loc), axis)
                                ->getResult(0));
  return add(x, added, loc);
}

namespace {

enum class Segment { Sum, Max, Min };

Tensor segmentReduce(const char* name, Segment kind, const Tensor& data, const Tensor& ids, int64_t segments, Loc loc) {
  Trace& trace = Trace::current(name, loc);
  const std::string at = where(loc) + ": spmd::" + name + ": ";
  if (data.rank() < 1 || data.dtype() == DType::i32)
    throw Error(at + "data must be a float tensor with a row axis first, got " + data.typeString());
  if (ids.dtype() != DType::i32 || ids.rank() != 1 || ids.dim(0) != data.dim(0))
    throw Error(at + "segmentIds must be i32 [" + std::to_string(data.dim(0)) + "], an id for each row of data " +
                data.typeString() + ", got " + ids.typeString());
  if (segments < 1 || segments > std::numeric_limits<int32_t>::max())
    throw Error(at + "segments must be from 1 to 2^31 - 1, got " + std::to_string(segments));
  Shape rows = data.shape();
  rows[0] = segments;
  // Both ops check their ids on the device (a bad one stops the run naming its position).
  // The rows as [N, width], folded by a sort of the ids (runtime/kernels/Embedding.h), where a
  // scatter's gather would visit every row for every segment: sums as an embedding lookup's
  // table gradient, max and min by segment_reduce.
  const int64_t width = numElements(std::span(data.shape()).subspan(1));  // data may have no rows
  const mlir::Value flat = trace.valueOf(reshape(data, {data.dim(0), width}, loc), loc);
  const mlir::Type type = detail::tensorType(data.dtype(), {segments, width});
  mlir::Operation* fold =
      kind == Segment::Sum
          ? trace.createWithType<ir::EmbeddingBackwardOp>(loc, type, flat, trace.valueOf(ids, loc))
          : trace.createWithType<ir::SegmentReduceOp>(loc, type, flat, trace.valueOf(ids, loc),
                                                      kind == Segment::Max ? ir::Reduction::Max : ir::Reduction::Min);
  return reshape(trace.wrap(fold->getResult(0)), rows, loc);
}

}  // namespace

Tensor segmentSum(const Tensor& data, const Tensor& segmentIds, int64_t segments, Loc loc) {
  return segmentReduce("segmentSum", Segment::Sum, data, segmentIds, segments, loc);
}

Tensor segmentMax(const Tensor& data, const Tensor& segmentIds, int64_t segments, Loc loc) {
  return segmentReduce("segmentMax", Segment::Max, data, segmentIds, segments, loc);
}

Tensor segmentMin(const Tensor& data, const Tensor& segmentIds, int64_t segments, Loc loc) {
  return segmentReduce("segmentMin", Segment::Min, data, segmentIds, segments, loc);
}

Tensor softmaxCrossEntropy(const Tensor& logits, const Tensor& labels, Loc loc) {
  Trace& trace = Trace::current("softmaxCrossEntropy", loc);
  return trace.wrap(trace
                        .create<ir::SoftmaxCrossEntropyOp>(loc, trace.valueOf(logits, loc),
                                                           trace.valueOf(labels, loc))
                        ->getResult(0));
}

}  // namespace spmd
