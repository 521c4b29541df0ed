#include "frontend/Composed.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "frontend/Checks.h"
#include "frontend/Indexing.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "runtime/base/Error.h"

namespace spmd {

using detail::Trace;
using detail::where;

namespace {

// Checks that `name` is called while tracing (the error names it, not the ops it is made of).
void tracing(const char* name, Loc loc) { Trace::current(name, loc); }

// x's shape with `axes` (already checked by a reduction) kept as 1: a reduced value broadcasts
// back against x.
Shape keptShape(const Tensor& x, std::vector<int64_t> axes) {
  Shape shape = x.shape();
  for (int64_t axis : axes) shape[axis < 0 ? axis + x.rank() : axis] = 1;
  return shape;
}

}  // namespace

Tensor silu(const Tensor& x, Loc loc) {
  tracing("silu", loc);
  return mul(x, sigmoid(x, loc), loc);
}

// Split at 0 so that the exponential's argument is never positive: x + log1p(e^-x) for x >= 0,
// log1p(e^x) below. The selects give -x its gradient -1 at 0 (|x| would give 0 there), so the
// gradient at 0 is 1/2, as sigmoid(0).
Tensor softplus(const Tensor& x, Loc loc) {
  tracing("softplus", loc);
  const Tensor zero = fill(x, 0.0, loc), nonNegative = greaterEqual(x, zero, loc);
  const Tensor linear = where(nonNegative, x, zero, loc);
  const Tensor down = where(nonNegative, neg(x, loc), x, loc);  // -|x|
  return add(linear, log1p(exp(down, loc), loc), loc);
}

Tensor logSigmoid(const Tensor& x, Loc loc) {
  tracing("logSigmoid", loc);
  return neg(softplus(neg(x, loc), loc), loc);
}

Tensor leakyRelu(const Tensor& x, double slope, Loc loc) {
  tracing("leakyRelu", loc);
  if (!std::isfinite(slope))
    throw Error(where(loc) + ": spmd::leakyRelu: the slope must be a finite number, got " + std::to_string(slope));
  return where(greater(x, fill(x, 0.0, loc), loc), x, mul(x, slope, loc), loc);
}

// alpha * expm1(min(x, 0)): the exponential of a positive x (inf beyond 88 in f32) is never
// computed, so its gradient cannot turn the selected branch's into NaN.
Tensor elu(const Tensor& x, double alpha, Loc loc) {
  tracing("elu", loc);
  if (!std::isfinite(alpha))
    throw Error(where(loc) + ": spmd::elu: alpha must be a finite number, got " + std::to_string(alpha));
  const Tensor zero = fill(x, 0.0, loc);
  return where(greater(x, zero, loc), x, mul(expm1(minimum(x, zero, loc), loc), alpha, loc), loc);
}

Tensor mish(const Tensor& x, Loc loc) {
  tracing("mish", loc);
  return mul(x, tanh(softplus(x, loc), loc), loc);
}

Tensor clamp(const Tensor& x, double low, double high, Loc loc) {
  tracing("clamp", loc);
  if (std::isnan(low) || std::isnan(high) || low > high)
    throw Error(where(loc) + ": spmd::clamp: the bounds must be numbers with low <= high, got [" + std::to_string(low) +
                ", " + std::to_string(high) + "]");
  // maximum and minimum send a tie's gradient to their left operand, x: it passes at the bounds.
  return minimum(maximum(x, fill(x, low, loc), loc), fill(x, high, loc), loc);
}

Tensor min(const Tensor& x, std::vector<int64_t> axes, Loc loc) {
  tracing("min", loc);
  return neg(max(neg(x, loc), std::move(axes), loc), loc);
}

Tensor logsumexp(const Tensor& x, std::vector<int64_t> axes, Loc loc) {
  tracing("logsumexp", loc);
  const Tensor largest = max(x, axes, loc);  // checks the axes
  // An infinite (or NaN) largest element is not taken out: -inf - -inf would be NaN.
  const Tensor finite = less(abs(largest, loc), fill(largest, INFINITY, loc), loc);
  const Tensor shift = where(finite, largest, fill(largest, 0.0, loc), loc);
  const Tensor sums = sum(exp(sub(x, reshape(shift, keptShape(x, axes), loc), loc), loc), axes, loc);
  return add(log(sums, loc), shift, loc);
}

Tensor sort(const Tensor& x, int64_t axis, bool descending, Loc loc) {
  tracing("sort", loc);
  return takeAlongAxis(x, argsort(x, axis, descending, loc), axis, loc);
}

TopK topK(const Tensor& x, int64_t k, Loc loc) {
  tracing("topK", loc);
  const int64_t rank = x.rank(), extent = rank ? x.shape().back() : 0;
  if (rank == 0 || k < 0 || k > extent)
    throw Error(where(loc) + ": spmd::topK: k = " + std::to_string(k) + " must be in [0, " + std::to_string(extent) +
                "], the extent of the last axis of " + shapeString(x.shape()) + (rank ? "" : " (a scalar has none)"));
  std::vector<int64_t> start(size_t(rank), 0), limit = x.shape();
  limit.back() = k;
  const Tensor indices = slice(argsort(x, -1, true, loc), start, limit, loc);
  return {takeAlongAxis(x, indices, rank - 1, loc), indices};
}

Tensor argmin(const Tensor& x, int64_t axis, Loc loc) {
  tracing("argmin", loc);
  return argmax(neg(x, loc), axis, loc);
}

Tensor variance(const Tensor& x, std::vector<int64_t> axes, int64_t correction, Loc loc) {
  tracing("variance", loc);
  const Tensor average = mean(x, axes, loc);  // checks the axes
  const int64_t n = x.numel() / std::max<int64_t>(average.numel(), 1);
  if (correction < 0)
    throw Error(where(loc) + ": spmd::variance: correction " + std::to_string(correction) +
                " is negative; give 0 (the biased variance) or more (1: torch.var's unbiased one)");
  if (n <= correction)
    throw Error(where(loc) + ": spmd::variance: each slice of " + x.typeString() + " holds " + std::to_string(n) +
                " element" + (n == 1 ? "" : "s") + ", which leaves nothing to divide by with correction " +
                std::to_string(correction) + " (n - correction must be positive; correction 0 is the biased variance)");
  const Tensor centered = sub(x, reshape(average, keptShape(x, axes), loc), loc);
  return mul(sum(mul(centered, centered, loc), axes, loc), 1.0 / double(n - correction), loc);
}

Tensor stddev(const Tensor& x, std::vector<int64_t> axes, int64_t correction, Loc loc) {
  tracing("stddev", loc);
  return sqrt(variance(x, std::move(axes), correction, loc), loc);
}

Tensor upsampleNearest2d(const Tensor& x, int64_t scaleH, int64_t scaleW, Loc loc) {
  tracing("upsampleNearest2d", loc);
  if (x.rank() != 4 || scaleH < 1 || scaleW < 1)
    throw Error(where(loc) + ": spmd::upsampleNearest2d: x must be [N, C, H, W] and the factors positive, got " +
                x.typeString() + " and " + std::to_string(scaleH) + " x " + std::to_string(scaleW));
  const Shape s = x.shape();
  const Tensor spread = broadcastTo(reshape(x, {s[0], s[1], s[2], 1, s[3], 1}, loc),
                                    {s[0], s[1], s[2], scaleH, s[3], scaleW}, loc);
  return reshape(spread, {s[0], s[1], s[2] * scaleH, s[3] * scaleW}, loc);
}

Tensor softmaxCrossEntropy(const Tensor& logits, const Tensor& labels, double labelSmoothing, Loc loc) {
  tracing("softmaxCrossEntropy", loc);
  if (!(labelSmoothing >= 0 && labelSmoothing <= 1))
    throw Error(where(loc) + ": spmd::softmaxCrossEntropy: labelSmoothing must be in [0, 1], got " +
                std::to_string(labelSmoothing));
  const Tensor hard = softmaxCrossEntropy(logits, labels, loc);
  if (labelSmoothing == 0) return hard;
  const Tensor uniform = neg(mean(logSoftmax(logits, -1, loc), {-1}, loc), loc);
  return add(mul(hard, 1 - labelSmoothing, loc), mul(uniform, labelSmoothing, loc), loc);
}

Tensor cumsum(const Tensor& x, int64_t axis, Loc loc) {
  tracing("cumsum", loc);
  const int64_t rank = x.rank(), at = detail::checkedAxis(x, axis, "cumsum", loc);
  if (x.dtype() == DType::i32)
    throw Error(where(loc) + ": spmd::cumsum: x " + x.typeString() +
                " is an integer tensor; running sums are float only (cast it: spmd::cast(x, DType::f32))");
  // After the pass with shift k, element i holds the sum of elements max(0, i - 2k + 1)..i.
  const int64_t n = x.dim(at);
  Tensor y = x;
  for (int64_t shift = 1; shift < n; shift *= 2) {
    std::vector<int64_t> start(size_t(rank), 0), limit = x.shape(), low(size_t(rank), 0), high(size_t(rank), 0);
    limit[size_t(at)] = n - shift;
    low[size_t(at)] = shift;
    y = add(y, pad(slice(y, start, limit, loc), low, high, loc), loc);
  }
  return y;
}

Tensor oneHot(const Tensor& labels, int64_t classes, DType dtype, Loc loc) {
  tracing("oneHot", loc);
  if (labels.dtype() != DType::i32)
    throw Error(where(loc) + ": spmd::oneHot: labels must be i32, got " + labels.typeString() +
                " (cast them: spmd::cast(labels, DType::i32))");
  if (classes < 1 || classes > std::numeric_limits<int32_t>::max())
    throw Error(where(loc) + ": spmd::oneHot: classes must be from 1 to 2^31 - 1, got " + std::to_string(classes));
  if (dtype == DType::i32)
    throw Error(where(loc) + ": spmd::oneHot: the rows are a float type (f32, f64 or bf16), got i32");
  // Labels and classes compared in a float type that holds both exactly.
  const DType exact = classes <= (int64_t(1) << 24) ? DType::f32 : DType::f64;
  Shape column = labels.shape();
  column.push_back(1);
  const Tensor ids = cast(arange(classes, DType::i32, loc), exact, loc);
  const Tensor rows = equal(reshape(cast(labels, exact, loc), column, loc), ids, loc);
  // Zeros read at the labels: each label checked at run time, at this line.
  const Tensor checked = reshape(detail::indexCheckZeros(labels, classes, exact, loc), column, loc);
  return cast(add(rows, checked, loc), dtype, loc);
}

Tensor arange(int64_t n, DType dtype, Loc loc) {
  if (n < 0 || n > std::numeric_limits<int32_t>::max())
    throw Error(where(loc) + ": spmd::arange: n must be from 0 to 2^31 - 1, got " + std::to_string(n));
  Array values = Array::zeros(dtype, {n});
  switch (dtype) {
    case DType::i32:
      for (int64_t i = 0; i < n; ++i) values.values<int32_t>()[size_t(i)] = int32_t(i);
      break;
    case DType::f32:
      for (int64_t i = 0; i < n; ++i) values.values<float>()[size_t(i)] = float(i);
      break;
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) values.values<double>()[size_t(i)] = double(i);
      break;
    default:
      throw Error(where(loc) + ": spmd::arange: dtype " + std::string(dtypeName(dtype)) +
                  " is not i32, f32 or f64 (cast the result)");
  }
  return Tensor(std::move(values));
}

}  // namespace spmd
