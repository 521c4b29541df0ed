// The losses of frontend/Losses.h, composed of the DSL's ops. Where a branch of a select would
// take the log of 0 its argument is replaced first (log of 1), so no infinity reaches a product
// with a zero cotangent and the gradient stays finite where the loss is.
#include "frontend/Losses.h"

#include <cmath>
#include <string>

#include "frontend/Checks.h"
#include "frontend/Composed.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "runtime/base/Error.h"

namespace spmd {

using detail::where;

namespace {

using detail::calledAt;
using detail::requireFloat;

std::string shapeText(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// input and target of one float dtype and one shape.
void requireAlike(const Tensor& input, const Tensor& target, const char* name, Loc loc) {
  calledAt(name, loc);
  requireFloat(input, "input", name, loc);
  if (target.dtype() != input.dtype())
    throw Error(calledAt(name, loc) + "target " + target.typeString() + " and input " + input.typeString() +
                " differ in dtype; cast the target to the input's");
  if (target.shape() != input.shape())
    throw Error(calledAt(name, loc) + "target " + target.typeString() + " and input " + input.typeString() +
                " differ in shape (torch would broadcast them with a warning: a [N] target against [N, 1] "
                "predictions gives an [N, N] loss); reshape or broadcastTo the target to the input's shape");
}

std::vector<int64_t> everyAxis(const Tensor& x) {
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < x.rank(); ++a) axes.push_back(a);
  return axes;
}

Tensor reduced(const Tensor& loss, LossReduction reduction, const char* name, Loc loc) {
  switch (reduction) {
    case LossReduction::none:
      return loss;
    case LossReduction::mean:
      return loss.rank() == 0 ? loss : mean(loss, everyAxis(loss), loc);
    case LossReduction::sum:
      return loss.rank() == 0 ? loss : sum(loss, everyAxis(loss), loc);
    case LossReduction::batchMean:
      if (loss.rank() == 0)
        throw Error(calledAt(name, loc) + "LossReduction::batchMean divides by the batch, the first dimension, but the "
                    "loss is a scalar; use LossReduction::sum");
      return mul(sum(loss, everyAxis(loss), loc), 1.0 / double(loss.dim(0)), loc);
  }
  throw Error(calledAt(name, loc) + "unknown LossReduction " + std::to_string(int(reduction)));
}

// log(x) clamped below at -100 (torch's binary_cross_entropy), 0 <= x: the log is taken of 1
// where x is below e^-100, so x = 0 gives -100 and a zero gradient.
Tensor clampedLog(const Tensor& x, Loc loc) {
  const Tensor inRange = greater(x, fill(x, std::exp(-100.0), loc), loc);
  return where(inRange, log(where(inRange, x, fill(x, 1.0, loc), loc), loc), fill(x, -100.0, loc), loc);
}

// The class axis (1) of [N, C, d1, ...] moved last and the rest flattened: [N * d1 * ..., C].
Tensor classesLast(const Tensor& x, Loc loc) {
  if (x.rank() == 2) return x;
  std::vector<int64_t> perm = {0};
  for (int64_t a = 2; a < x.rank(); ++a) perm.push_back(a);
  perm.push_back(1);
  // Not -1: no class (C = 0) would leave it undetermined.
  const int64_t rows = x.dim(0) * numElements(std::span(x.shape()).subspan(2));
  return reshape(transpose(x, perm, loc), {rows, x.dim(1)}, loc);
}

// Checks [N, C, d1, ...] scores against i32 class indices [N, d1, ...].
void requireIndexTarget(const Tensor& scores, const Tensor& target, const char* what, const char* name, Loc loc) {
  Shape expected = scores.shape();
  expected.erase(expected.begin() + 1);
  if (target.shape() != expected)
    throw Error(calledAt(name, loc) + "i32 target " + target.typeString() + " does not fit " + what + " " +
                scores.typeString() + ": class indices take the " + what + "' shape without the class axis 1, " +
                shapeText(expected));
}

void requireClasses(const Tensor& scores, const char* what, const char* name, Loc loc) {
  calledAt(name, loc);
  requireFloat(scores, what, name, loc);
  if (scores.rank() < 2)
    throw Error(calledAt(name, loc) + what + " " + scores.typeString() + " needs a batch and a class axis: [N, C] or [N, C, "
                "d1, ...] (classes on axis 1, as torch)");
}

// Class indices with those equal to ignoreIndex replaced by 0 (any valid class), and the mask
// (1 kept, 0 ignored) in `dtype`. The comparison runs in f64, which holds every i32 exactly.
struct KeptIndices {
  Tensor indices, kept;
};

KeptIndices withoutIgnored(const Tensor& target, int64_t ignoreIndex, DType dtype, Loc loc) {
  const Tensor wide = cast(target, DType::f64, loc);
  const Tensor kept = notEqual(wide, fill(wide, double(ignoreIndex), loc), loc);
  return {cast(where(kept, wide, fill(wide, 0.0, loc), loc), DType::i32, loc), cast(kept, dtype, loc)};
}

// The reduction of per-element losses of which only `kept` count: torch's mean divides by the
// kept ones' count (weights 1), not by every element.
Tensor reducedKept(const Tensor& loss, const Tensor& kept, LossReduction reduction, const char* name, Loc loc) {
  const Tensor masked = mul(loss, kept, loc);
  if (reduction != LossReduction::mean) return reduced(masked, reduction, name, loc);
  return div(sum(masked, everyAxis(masked), loc), sum(kept, everyAxis(kept), loc), loc);
}

}  // namespace

namespace detail {

std::string calledAt(const char* name, Loc loc) {
  Trace::current(name, loc);
  return where(loc) + ": spmd::" + name + ": ";
}

int64_t checkedAxis(const Tensor& x, int64_t axis, const char* name, Loc loc) {
  const int64_t rank = x.rank(), at = axis < 0 ? axis + rank : axis;
  if (at < 0 || at >= rank)
    throw Error(calledAt(name, loc) + "axis " + std::to_string(axis) + " is outside " + x.typeString() + " (rank " +
                std::to_string(rank) + "; negative axes count from the end)");
  return at;
}

void requireFloat(const Tensor& x, const char* what, const char* name, Loc loc) {
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64 && x.dtype() != DType::bf16)
    throw Error(calledAt(name, loc) + what + " " + x.typeString() + " is not a float tensor; cast it (spmd::cast(" +
                what + ", DType::f32))");
}

}  // namespace detail

Tensor mseLoss(const Tensor& input, const Tensor& target, LossReduction reduction, Loc loc) {
  requireAlike(input, target, "mseLoss", loc);
  const Tensor d = sub(input, target, loc);
  return reduced(mul(d, d, loc), reduction, "mseLoss", loc);
}

Tensor l1Loss(const Tensor& input, const Tensor& target, LossReduction reduction, Loc loc) {
  requireAlike(input, target, "l1Loss", loc);
  return reduced(abs(sub(input, target, loc), loc), reduction, "l1Loss", loc);
}

Tensor smoothL1Loss(const Tensor& input, const Tensor& target, LossReduction reduction, double beta, Loc loc) {
  requireAlike(input, target, "smoothL1Loss", loc);
  if (!(beta >= 0) || !std::isfinite(beta))
    throw Error(calledAt("smoothL1Loss", loc) + "beta must be a finite number >= 0, got " + std::to_string(beta));
  const Tensor d = sub(input, target, loc), z = abs(d, loc);
  if (beta == 0) return reduced(z, reduction, "smoothL1Loss", loc);
  // d * d, not z * z: the quadratic branch's gradient d / beta passes through 0 without abs's kink.
  const Tensor quadratic = mul(mul(d, d, loc), 0.5 / beta, loc), linear = add(z, -0.5 * beta, loc);
  return reduced(where(less(z, fill(z, beta, loc), loc), quadratic, linear, loc), reduction, "smoothL1Loss", loc);
}

Tensor huberLoss(const Tensor& input, const Tensor& target, LossReduction reduction, double delta, Loc loc) {
  requireAlike(input, target, "huberLoss", loc);
  if (!(delta > 0) || !std::isfinite(delta))
    throw Error(calledAt("huberLoss", loc) + "delta must be a finite number > 0, got " + std::to_string(delta));
  const Tensor d = sub(input, target, loc), z = abs(d, loc);
  const Tensor quadratic = mul(mul(d, d, loc), 0.5, loc), linear = mul(add(z, -0.5 * delta, loc), delta, loc);
  return reduced(where(less(z, fill(z, delta, loc), loc), quadratic, linear, loc), reduction, "huberLoss", loc);
}

Tensor binaryCrossEntropy(const Tensor& probabilities, const Tensor& target, LossReduction reduction, Loc loc) {
  requireAlike(probabilities, target, "binaryCrossEntropy", loc);
  const Tensor& p = probabilities;
  const Tensor q = add(neg(p, loc), 1.0, loc), notTarget = add(neg(target, loc), 1.0, loc);
  const Tensor loss = neg(add(mul(target, clampedLog(p, loc), loc), mul(notTarget, clampedLog(q, loc), loc), loc), loc);
  return reduced(loss, reduction, "binaryCrossEntropy", loc);
}

Tensor binaryCrossEntropyWithLogits(const Tensor& logits, const Tensor& target, LossReduction reduction,
                                    const Tensor& posWeight, Loc loc) {
  const char* name = "binaryCrossEntropyWithLogits";
  requireAlike(logits, target, name, loc);
  const Tensor notTarget = add(neg(target, loc), 1.0, loc);
  // softplus(-x) = log(1 + e^-x) = -log sigmoid(x), without overflow either side.
  const Tensor negativeLog = softplus(neg(logits, loc), loc);
  Tensor weight;
  if (posWeight.defined()) {
    if (posWeight.dtype() != logits.dtype())
      throw Error(calledAt(name, loc) + "posWeight " + posWeight.typeString() + " and logits " + logits.typeString() +
                  " differ in dtype; cast posWeight to the logits'");
    bool fits = posWeight.rank() <= logits.rank();
    for (int64_t i = 1; fits && i <= posWeight.rank(); ++i) {
      const int64_t w = posWeight.dim(posWeight.rank() - i), x = logits.dim(logits.rank() - i);
      fits = w == x || w == 1;
    }
    if (!fits)
      throw Error(calledAt(name, loc) + "posWeight " + posWeight.typeString() + " does not broadcast against logits " +
                  logits.typeString() + " (its dimensions, from the last, must equal the logits' or be 1: one "
                  "weight a class is [" + std::to_string(logits.dim(logits.rank() - 1)) + "])");
    weight = add(mul(target, add(posWeight, -1.0, loc), loc), 1.0, loc);  // 1 + (w - 1) t
  }
  const Tensor loss = add(mul(notTarget, logits, loc), weight.defined() ? mul(weight, negativeLog, loc) : negativeLog, loc);
  return reduced(loss, reduction, name, loc);
}

Tensor crossEntropy(const Tensor& logits, const Tensor& target, LossReduction reduction, double labelSmoothing,
                    int64_t ignoreIndex, Loc loc) {
  const char* name = "crossEntropy";
  requireClasses(logits, "logits", name, loc);
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1))
    throw Error(calledAt(name, loc) + "labelSmoothing must be in [0, 1], got " + std::to_string(labelSmoothing));
  if (target.dtype() == DType::i32) {
    requireIndexTarget(logits, target, "logits", name, loc);
    const KeptIndices labels = withoutIgnored(target, ignoreIndex, logits.dtype(), loc);
    const Tensor loss =
        softmaxCrossEntropy(classesLast(logits, loc), reshape(labels.indices, {-1}, loc), labelSmoothing, loc);
    return reducedKept(reshape(loss, target.shape(), loc), labels.kept, reduction, name, loc);
  }
  if (target.dtype() != logits.dtype() || target.shape() != logits.shape())
    throw Error(calledAt(name, loc) + "target " + target.typeString() + " is neither i32 class indices of shape " +
                [&] {
                  Shape s = logits.shape();
                  s.erase(s.begin() + 1);
                  return shapeText(s);
                }() +
                " nor class probabilities of logits " + logits.typeString() + "'s dtype and shape");
  Tensor probabilities = target;
  if (labelSmoothing > 0)
    probabilities = add(mul(target, 1 - labelSmoothing, loc), labelSmoothing / double(logits.dim(1)), loc);
  const Tensor loss = neg(sum(mul(probabilities, logSoftmax(logits, 1, loc), loc), {1}, loc), loc);
  return reduced(loss, reduction, name, loc);
}

Tensor nllLoss(const Tensor& logProbabilities, const Tensor& target, LossReduction reduction, int64_t ignoreIndex,
               Loc loc) {
  const char* name = "nllLoss";
  requireClasses(logProbabilities, "logProbabilities", name, loc);
  if (target.dtype() != DType::i32)
    throw Error(calledAt(name, loc) + "target " + target.typeString() + " must hold i32 class indices (cast it: "
                "spmd::cast(target, DType::i32)); for class probabilities use spmd::crossEntropy on the logits");
  requireIndexTarget(logProbabilities, target, "logProbabilities", name, loc);
  Shape withClass = target.shape();
  withClass.insert(withClass.begin() + 1, 1);
  const KeptIndices labels = withoutIgnored(target, ignoreIndex, logProbabilities.dtype(), loc);
  const Tensor picked = takeAlongAxis(logProbabilities, reshape(labels.indices, withClass, loc), 1, loc);
  return reducedKept(neg(reshape(picked, target.shape(), loc), loc), labels.kept, reduction, name, loc);
}

Tensor klDiv(const Tensor& input, const Tensor& target, LossReduction reduction, bool logTarget, Loc loc) {
  requireAlike(input, target, "klDiv", loc);
  Tensor loss;
  if (logTarget) {
    loss = mul(exp(target, loc), sub(target, input, loc), loc);
  } else {
    // xlogy(t, t) - t * input: the log taken of 1 where t = 0 (a negative t still gives NaN, as torch).
    const Tensor nonzero = notEqual(target, fill(target, 0.0, loc), loc);
    const Tensor logTargetSafe = log(where(nonzero, target, fill(target, 1.0, loc), loc), loc);
    loss = mul(target, sub(logTargetSafe, input, loc), loc);
  }
  return reduced(loss, reduction, "klDiv", loc);
}

}  // namespace spmd
