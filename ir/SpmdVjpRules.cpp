// VJP rules of the `spmd` ops (the VjpOpInterface): each builds the operands' cotangents from
// the results' cotangents with ordinary `spmd` ops at the forward op's location. Rules may
// build cotangents nobody asks for; canonicalization erases them, as their ops are pure.
#include "ir/SpmdDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace spmd::ir {
namespace {

RankedTensorType typeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// Builds the ops rules need at one location.
struct Emit {
  OpBuilder& b;
  Location loc;

  Value add(Value x, Value y) { return b.create<AddOp>(loc, x, y); }
  Value sub(Value x, Value y) { return b.create<SubOp>(loc, x, y); }
  Value mul(Value x, Value y) { return b.create<MulOp>(loc, x, y); }
  Value div(Value x, Value y) { return b.create<DivOp>(loc, x, y); }
  Value neg(Value x) { return b.create<NegOp>(loc, x); }
  Value splat(RankedTensorType type, double value) {
    auto attr = SplatElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value));
    return b.create<ConstantOp>(loc, llvm::cast<ElementsAttr>(attr));
  }
  Value scale(Value x, double factor) { return mul(x, splat(typeOf(x), factor)); }
  Value sum(Value x, ArrayRef<int64_t> axes) {
    return axes.empty() ? x : b.create<ReduceSumOp>(loc, x, axes).getResult();
  }
  Value broadcast(Value x, RankedTensorType to, ArrayRef<int64_t> dims) {
    return typeOf(x) == to ? x : b.create<BroadcastInDimOp>(loc, to, x, dims).getResult();
  }
  Value reshape(Value x, RankedTensorType to) {
    return typeOf(x) == to ? x : b.create<ReshapeOp>(loc, to, x).getResult();
  }
  Value matmul(Value lhs, Value rhs, bool transposeLhs, bool transposeRhs) {
    return b.create<MatmulOp>(loc, lhs, rhs, Value(), transposeLhs, transposeRhs);
  }
};

// The dims of a rank-`rank` tensor that are not in `axes` (in order).
SmallVector<int64_t> keptDims(int64_t rank, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept;
  for (int64_t i = 0; i < rank; ++i)
    if (!llvm::is_contained(axes, i)) kept.push_back(i);
  return kept;
}

// Every dim but the channel dim (1) of an [N, C] or [N, C, H, W] tensor.
SmallVector<int64_t> nonChannelAxes(RankedTensorType type) {
  return keptDims(type.getRank(), {1});
}

}  // namespace

//===--- convolution and normalization -------------------------------------------------------===//

LogicalResult Conv2dOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                 SmallVectorImpl<Value>& out) {
  if (getRelu())
    return emitOpError("with relu has no VJP: spmd-fuse-relu makes this form after autodiff; "
                       "write conv2d followed by relu instead");
  Emit e{b, getLoc()};
  Value dy = grads[0];
  // The bias gradient first: it then reads dy straight after dy's producer wrote it, while it is
  // still in cache (ResNet-18 at width 16: its 21 sums 3.3-3.8 -> 2.1-2.4 ms a step); the
  // results keep the operands' order.
  Value dbias = getBias() ? e.sum(dy, {0, 2, 3}) : Value();
  out.push_back(b.create<Conv2dBackwardDataOp>(getLoc(), getInput().getType(), dy, getFilter(),
                                               getStrideAttr(), getPaddingAttr(), getDilationAttr(),
                                               getGroupsAttr()));
  out.push_back(b.create<Conv2dBackwardFilterOp>(getLoc(), getFilter().getType(), getInput(), dy,
                                                 getStrideAttr(), getPaddingAttr(), getDilationAttr(),
                                                 getGroupsAttr()));
  if (dbias) out.push_back(dbias);
  return success();
}

// result_grad and filter of the transposed convolution: the convolution of the cotangent (the
// forward op this one is the input gradient of), and that convolution's filter gradient.
LogicalResult Conv2dBackwardDataOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Value g = grads[0];
  out.push_back(b.create<Conv2dOp>(getLoc(), g, getFilter(), Value(), getStrideAttr(), getPaddingAttr(),
                                   b.getBoolAttr(false), getDilationAttr(), getGroupsAttr()));
  out.push_back(b.create<Conv2dBackwardFilterOp>(getLoc(), getFilter().getType(), g, getResultGrad(), getStrideAttr(),
                                                 getPaddingAttr(), getDilationAttr(), getGroupsAttr()));
  return success();
}

LogicalResult BatchNormTrainOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value>& out) {
  if (getRelu())
    return emitOpError("with relu has no VJP: spmd-fuse-relu makes this form after autodiff; "
                       "write batch_norm_train followed by relu instead");
  Emit e{b, getLoc()};
  auto xType = typeOf(getInput());
  Value dy = grads[0] ? grads[0] : e.splat(xType, 0.0);
  auto backward = b.create<BatchNormTrainBackwardOp>(getLoc(), dy, getInput(), getScale(),
                                                     getBatchMean(), getBatchVariance(), getMask(),
                                                     getEpsilonAttr());
  Value dx = backward.getInputGrad();
  // Paths through the returned statistics: d mean/dx = 1/M, d var/dx = 2 (x - mean) / M; with a
  // mask w, w_n / W and 2 w_n (x - mean) / W (W = sum(w) * H * W).
  double count = double(xType.getNumElements() / xType.getDimSize(1));
  Value weight;  // w_n / W per element, with a mask
  if (getMask() && (grads[1] || grads[2])) {
    auto scalar = RankedTensorType::get({}, xType.getElementType());
    Value total = e.scale(e.sum(getMask(), {0}), count / double(xType.getDimSize(0)));
    weight = e.div(e.broadcast(getMask(), xType, {0}), e.broadcast(e.reshape(total, scalar), xType, {}));
  }
  if (grads[1])
    dx = e.add(dx, weight ? e.mul(e.broadcast(grads[1], xType, {1}), weight)
                          : e.broadcast(e.scale(grads[1], 1.0 / count), xType, {1}));
  if (grads[2]) {
    Value centered = e.sub(getInput(), e.broadcast(getBatchMean(), xType, {1}));
    Value term = weight ? e.mul(e.mul(e.broadcast(e.scale(grads[2], 2.0), xType, {1}), weight), centered)
                        : e.mul(e.broadcast(e.scale(grads[2], 2.0 / count), xType, {1}), centered);
    dx = e.add(dx, term);
  }
  out.append({dx, backward.getScaleGrad(), backward.getOffsetGrad()});
  if (getMask()) out.push_back(Value());  // the mask takes no gradient
  return success();
}

LogicalResult BatchNormInferOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  auto xType = typeOf(getInput());
  auto cType = typeOf(getScale());
  auto perChannel = [&](Value v) { return e.broadcast(v, xType, {1}); };
  SmallVector<int64_t> axes = nonChannelAxes(xType);
  Value dy = grads[0];
  Value std = b.create<SqrtOp>(getLoc(), e.add(getVariance(), e.splat(cType, getEpsilon().convertToDouble())));
  Value rstd = e.div(e.splat(cType, 1.0), std);
  Value centered = e.sub(getInput(), perChannel(getMean()));
  Value dyCentered = e.sum(e.mul(dy, centered), axes);
  Value doffset = e.sum(dy, axes);
  Value scaleRstd = e.mul(getScale(), rstd);
  out.push_back(e.mul(dy, perChannel(scaleRstd)));                             // input
  out.push_back(e.mul(dyCentered, rstd));                                      // scale
  out.push_back(doffset);                                                      // offset
  out.push_back(e.neg(e.mul(doffset, scaleRstd)));                             // mean
  Value rstd3 = e.mul(rstd, e.mul(rstd, rstd));
  out.push_back(e.scale(e.mul(dyCentered, e.mul(getScale(), rstd3)), -0.5));  // variance
  return success();
}

//===--- pooling and normalizing along an axis -----------------------------------------------===//

// One rule for every window reduction: max routes each cotangent to the element its window
// chose (so the backward reads the forward's input), sum and mean spread it over the window.
LogicalResult ReduceWindowOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                       SmallVectorImpl<Value>& out) {
  Value input = getReduction() == Reduction::Max ? getInput() : Value();
  out.push_back(b.create<ReduceWindowBackwardOp>(getLoc(), getInput().getType(), grads[0], input,
                                                 getReduction(), getWindow(), getStride(),
                                                 getPadding(), getDilation(),
                                                 getCountIncludePad()));
  return success();
}

// y = softmax(x): dx = y * (dy - sum(dy * y)) along the axis. Built from ordinary ops, so it
// differentiates again.
LogicalResult SoftmaxOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                  SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  auto type = typeOf(getInput());
  int64_t axis = getAxis();
  Value y = getResult(), dy = grads[0];
  Value dot = e.broadcast(e.sum(e.mul(dy, y), {axis}), type, keptDims(type.getRank(), {axis}));
  out.push_back(e.mul(y, e.sub(dy, dot)));
  return success();
}

// y = log_softmax(x): dx = dy - exp(y) * sum(dy) along the axis.
LogicalResult LogSoftmaxOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  auto type = typeOf(getInput());
  int64_t axis = getAxis();
  Value total = e.broadcast(e.sum(grads[0], {axis}), type, keptDims(type.getRank(), {axis}));
  out.push_back(e.sub(grads[0], e.mul(b.create<ExpOp>(getLoc(), getResult()), total)));
  return success();
}

//===--- embedding ---------------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(b.create<EmbeddingBackwardOp>(getLoc(), getTable().getType(), grads[0], getIds()));
  out.push_back(Value());  // integer ids have no cotangent
  return success();
}

LogicalResult EmbeddingBackwardOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(b.create<EmbeddingOp>(getLoc(), grads[0], getIds()));
  out.push_back(Value());
  return success();
}

//===--- take_along_axis ---------------------------------------------------------------------===//

LogicalResult TakeAlongAxisOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(b.create<TakeAlongAxisBackwardOp>(getLoc(), getInput().getType(), grads[0], getIndices(),
                                                  getAxisAttr()));
  out.push_back(Value());  // integer indices have no cotangent
  return success();
}

LogicalResult TakeAlongAxisBackwardOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(b.create<TakeAlongAxisOp>(getLoc(), grads[0], getIndices(), getAxisAttr()));
  out.push_back(Value());
  return success();
}

//===--- scatter, scatter_reduce -------------------------------------------------------------===//

LogicalResult ScatterOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  const int64_t axis = getAxis();
  RankedTensorType inType = typeOf(getInput()), atType = typeOf(getIndices());
  // Which update was written: each one's position along the axis (f64: exact for any count),
  // scattered as this op scatters (the last one at a place wins), read back at its index, and
  // compared with its own. Where -1 stays, no update was written and input's element was kept.
  auto f64 = b.getF64Type();
  auto posType = RankedTensorType::get(atType.getShape(), f64), placeType = RankedTensorType::get(inType.getShape(), f64);
  SmallVector<double> iota(atType.getDimSize(axis));
  for (size_t j = 0; j < iota.size(); ++j) iota[j] = double(j);
  auto iotaType = RankedTensorType::get({atType.getDimSize(axis)}, f64);
  Value line = b.create<ConstantOp>(getLoc(), llvm::cast<ElementsAttr>(DenseElementsAttr::get(iotaType, ArrayRef<double>(iota))));
  Value pos = e.broadcast(line, posType, {axis});
  Value none = e.splat(placeType, -1.0);
  Value last = b.create<ScatterOp>(getLoc(), none, getIndices(), pos, getAxisAttr());
  Value written = b.create<EqualOp>(getLoc(), b.create<TakeAlongAxisOp>(getLoc(), last, getIndices(), getAxisAttr()), pos);
  Value kept = b.create<EqualOp>(getLoc(), last, none);
  auto like = [&](Value mask, Value as) {
    return typeOf(mask) == typeOf(as) ? mask : b.create<ConvertOp>(getLoc(), typeOf(as), mask).getResult();
  };
  out.push_back(e.mul(grads[0], like(kept, getInput())));
  out.push_back(Value());  // integer indices have no cotangent
  out.push_back(e.mul(b.create<TakeAlongAxisOp>(getLoc(), grads[0], getIndices(), getAxisAttr()), like(written, getUpdates())));
  return success();
}

LogicalResult SegmentReduceOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  // scatter_reduce's rule by rows: the rows equal to their segment's result share its gradient,
  // counted by a segment sum (embedding_backward) of the masks.
  Value atRows = b.create<EmbeddingOp>(getLoc(), getResult(), getSegmentIds());
  Value isResult = getReduction() == Reduction::Max ? b.create<GreaterEqualOp>(getLoc(), getData(), atRows).getResult()
                                                    : b.create<LessEqualOp>(getLoc(), getData(), atRows).getResult();
  Value count = b.create<EmbeddingBackwardOp>(getLoc(), getResult().getType(), isResult, getSegmentIds());
  Value share = e.div(grads[0], count);
  out.push_back(e.mul(b.create<EmbeddingOp>(getLoc(), share, getSegmentIds()), isResult));
  out.push_back(Value());
  return success();
}

LogicalResult ScatterReduceOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  // As torch's: the operands equal to the result (input's element, and the updates equal to
  // their place's result) share its gradient evenly. The result is one of them, so the count is
  // at least 1 (a NaN result has none: its gradient is NaN, as reduce_max's).
  auto isResult = [&](Value v, Value r) -> Value {
    if (getReduction() == Reduction::Max) return b.create<GreaterEqualOp>(getLoc(), v, r);
    return b.create<LessEqualOp>(getLoc(), v, r);
  };
  Value fromInput = isResult(getInput(), getResult());
  Value fromUpdates =
      isResult(getUpdates(), b.create<TakeAlongAxisOp>(getLoc(), getResult(), getIndices(), getAxisAttr()));
  Value count = e.add(fromInput, b.create<TakeAlongAxisBackwardOp>(getLoc(), getInput().getType(), fromUpdates,
                                                                   getIndices(), getAxisAttr()));
  Value share = e.div(grads[0], count);
  out.push_back(e.mul(share, fromInput));
  out.push_back(Value());
  out.push_back(e.mul(b.create<TakeAlongAxisOp>(getLoc(), share, getIndices(), getAxisAttr()), fromUpdates));
  return success();
}

//===--- elementwise -------------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder&, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.append({grads[0], grads[0]});
  return success();
}

LogicalResult SubOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.append({grads[0], Emit{b, getLoc()}.neg(grads[0])});
  return success();
}

LogicalResult MulOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  out.append({e.mul(grads[0], getRhs()), e.mul(grads[0], getLhs())});
  return success();
}

LogicalResult DivOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  // y = a / b: da = dy / b, db = -dy * y / b.
  out.append({e.div(grads[0], getRhs()), e.neg(e.div(e.mul(grads[0], getResult()), getRhs()))});
  return success();
}

LogicalResult MaxOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  // Ties go to lhs.
  Value toLhs = e.mul(grads[0], b.create<GreaterEqualOp>(getLoc(), getLhs(), getRhs()));
  out.append({toLhs, e.sub(grads[0], toLhs)});
  return success();
}

LogicalResult MinOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  // Ties go to lhs.
  Value toLhs = e.mul(grads[0], b.create<LessEqualOp>(getLoc(), getLhs(), getRhs()));
  out.append({toLhs, e.sub(grads[0], toLhs)});
  return success();
}

LogicalResult NegOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(Emit{b, getLoc()}.neg(grads[0]));
  return success();
}

LogicalResult ExpOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(Emit{b, getLoc()}.mul(grads[0], getResult()));
  return success();
}

LogicalResult LogOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(Emit{b, getLoc()}.div(grads[0], getInput()));
  return success();
}

LogicalResult SqrtOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  out.push_back(e.div(e.scale(grads[0], 0.5), getResult()));
  return success();
}

LogicalResult TanhOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // (1 - y^2) dy
  Value y = getResult();
  out.push_back(e.mul(grads[0], e.sub(e.splat(typeOf(y), 1.0), e.mul(y, y))));
  return success();
}

LogicalResult SinOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(Emit{b, getLoc()}.mul(grads[0], b.create<CosOp>(getLoc(), getInput())));  // cos(x) dy
  return success();
}

LogicalResult CosOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // -sin(x) dy
  out.push_back(e.mul(grads[0], e.neg(b.create<SinOp>(getLoc(), getInput()))));
  return success();
}

LogicalResult Log1pOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // dy / (1 + x)
  out.push_back(e.div(grads[0], e.add(getInput(), e.splat(typeOf(getInput()), 1.0))));
  return success();
}

LogicalResult Expm1Op::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(Emit{b, getLoc()}.mul(grads[0], b.create<ExpOp>(getLoc(), getInput())));  // e^x dy
  return success();
}

LogicalResult PowOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  // torch's rule: b a^(b - 1) dy, 0 where b = 0 (0^-1 would make it NaN); a^b log(a) dy, 0 where
  // a = 0 and b >= 0 (log 0 would).
  Emit e{b, getLoc()};
  const Location loc = getLoc();
  Value x = getLhs(), p = getRhs(), zero = e.splat(typeOf(x), 0.0);
  Value powered = b.create<PowOp>(loc, x, e.sub(p, e.splat(typeOf(p), 1.0)));
  Value dx = b.create<SelectOp>(loc, b.create<EqualOp>(loc, p, zero), zero, e.mul(grads[0], e.mul(p, powered)));
  Value atZero = e.mul(b.create<EqualOp>(loc, x, zero), b.create<GreaterEqualOp>(loc, p, zero));
  Value dp = b.create<SelectOp>(loc, atZero, zero, e.mul(grads[0], e.mul(getResult(), b.create<LogOp>(loc, x))));
  out.push_back(dx);
  out.push_back(dp);
  return success();
}

LogicalResult ErfOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // 2/sqrt(pi) e^(-x^2) dy
  Value x = getInput();
  Value density = b.create<ExpOp>(getLoc(), e.neg(e.mul(x, x)));
  out.push_back(e.mul(grads[0], e.scale(density, 1.12837916709551257390)));
  return success();
}

LogicalResult ErfinvOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // sqrt(pi)/2 e^(y^2) dy, y = erfinv(x)
  Value y = getResult();
  out.push_back(e.mul(grads[0], e.scale(b.create<ExpOp>(getLoc(), e.mul(y, y)), 0.88622692545275801365)));
  return success();
}

LogicalResult SigmoidOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // y (1 - y) dy
  Value y = getResult();
  out.push_back(e.mul(grads[0], e.mul(y, e.sub(e.splat(typeOf(y), 1.0), y))));
  return success();
}

LogicalResult AbsOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};  // sign(x) dy, with sign 0 at 0 and at NaN (as torch.abs)
  Value x = getInput(), zero = e.splat(typeOf(x), 0.0);
  Value sign = e.sub(b.create<GreaterOp>(getLoc(), x, zero), b.create<LessOp>(getLoc(), x, zero));
  out.push_back(e.mul(grads[0], sign));
  return success();
}

LogicalResult GeluOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(b.create<GeluBackwardOp>(getLoc(), grads[0], getInput()));
  return success();
}

LogicalResult ReluOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  out.push_back(b.create<ReluBackwardOp>(getLoc(), grads[0], getResult()));
  return success();
}

//===--- shape -------------------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                         SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  auto in = getInput().getType(), result = getResult().getType();
  ArrayRef<int64_t> dims = getDims();
  // Sum over the dims the broadcast created or stretched from 1, then restore the input shape.
  SmallVector<int64_t> axes = keptDims(result.getRank(), dims);
  for (size_t i = 0; i < dims.size(); ++i)
    if (in.getDimSize(i) == 1 && result.getDimSize(dims[i]) != 1) axes.push_back(dims[i]);
  llvm::sort(axes);
  out.push_back(e.reshape(e.sum(grads[0], axes), in));
  return success();
}

LogicalResult ReshapeOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                  SmallVectorImpl<Value>& out) {
  out.push_back(Emit{b, getLoc()}.reshape(grads[0], getInput().getType()));
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                    SmallVectorImpl<Value>& out) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  out.push_back(b.create<TransposeOp>(getLoc(), grads[0], inverse));
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  auto in = typeOf(getInput());
  SmallVector<int64_t> high;
  for (int64_t d = 0; d < in.getRank(); ++d) high.push_back(in.getDimSize(d) - getLimit()[d]);
  out.push_back(b.create<PadOp>(getLoc(), grads[0], getStart(), high));
  return success();
}

LogicalResult PadOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  auto in = typeOf(getInput());
  SmallVector<int64_t> limit;
  for (int64_t d = 0; d < in.getRank(); ++d) limit.push_back(getLow()[d] + in.getDimSize(d));
  out.push_back(b.create<SliceOp>(getLoc(), grads[0], getLow(), limit));
  return success();
}

LogicalResult ConcatenateOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  auto result = typeOf(getResult());
  int64_t axis = getAxis(), offset = 0;
  for (Value input : getInputs()) {
    SmallVector<int64_t> start(result.getRank(), 0), limit(result.getShape());
    start[axis] = offset;
    offset += typeOf(input).getDimSize(axis);
    limit[axis] = offset;
    out.push_back(b.create<SliceOp>(getLoc(), grads[0], start, limit));
  }
  return success();
}

LogicalResult SelectOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  Value zero = e.splat(typeOf(getResult()), 0.0);
  out.push_back(zero);  // the condition is a mask: no gradient
  out.push_back(b.create<SelectOp>(getLoc(), getCondition(), grads[0], zero));
  out.push_back(b.create<SelectOp>(getLoc(), getCondition(), zero, grads[0]));
  return success();
}

LogicalResult ConvertOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  auto in = typeOf(getInput());
  if (!llvm::isa<FloatType>(in.getElementType())) {
    out.push_back(Value());  // integers have no cotangent
  } else if (!llvm::isa<FloatType>(typeOf(getResult()).getElementType()) || !grads[0]) {
    out.push_back(Emit{b, getLoc()}.splat(in, 0.0));  // float -> i32 is piecewise constant
  } else {
    out.push_back(b.create<ConvertOp>(getLoc(), in, grads[0]));
  }
  return success();
}

//===--- reductions --------------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                    SmallVectorImpl<Value>& out) {
  auto in = typeOf(getInput());
  out.push_back(Emit{b, getLoc()}.broadcast(grads[0], in, keptDims(in.getRank(), getAxes())));
  return success();
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                     SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  auto in = typeOf(getInput());
  double count = double(in.getNumElements()) / double(typeOf(getResult()).getNumElements());
  out.push_back(e.broadcast(e.scale(grads[0], 1.0 / count), in, keptDims(in.getRank(), getAxes())));
  return success();
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                    SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  auto in = typeOf(getInput());
  SmallVector<int64_t> kept = keptDims(in.getRank(), getAxes());
  // Tied maxima share the cotangent equally (as jax.numpy.max does).
  Value isMax = b.create<GreaterEqualOp>(getLoc(), getInput(), e.broadcast(getResult(), in, kept));
  Value share = e.div(grads[0], e.sum(isMax, getAxes()));
  out.push_back(e.mul(e.broadcast(share, in, kept), isMax));
  return success();
}

//===--- dense layers and losses ------------------------------------------------------------===//

LogicalResult MatmulOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                 SmallVectorImpl<Value>& out) {
  Emit e{b, getLoc()};
  Value dc = grads[0], lhs = getLhs(), rhs = getRhs();
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  // C = op(A) op(B). dA = dC op(B)^T (or its transpose when A is stored transposed); likewise B.
  Value dLhs = tl ? e.matmul(rhs, dc, tr, true) : e.matmul(dc, rhs, false, !tr);
  Value dRhs = tr ? e.matmul(dc, lhs, true, tl) : e.matmul(lhs, dc, !tl, false);
  out.append({dLhs, dRhs});
  if (getBias()) out.push_back(e.sum(dc, keptDims(typeOf(dc).getRank(), {typeOf(dc).getRank() - 1})));
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                              SmallVectorImpl<Value>& out) {
  out.push_back(
      b.create<SoftmaxCrossEntropyBackwardOp>(getLoc(), getLogits(), getLabels(), grads[0]));
  out.push_back(Value());  // integer labels have no cotangent
  return success();
}

}  // namespace spmd::ir
