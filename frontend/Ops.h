// The DSL's op functions. Inside spmd::jit they record `spmd` dialect ops at the caller's
// source line; shape errors are thrown as spmd::Error naming that line.
#pragma once

#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// torch.nn.functional.conv2d's arguments: `dilation` spaces the filter's taps; with `groups` = G
// the filter is [O, C / G, KH, KW] and each group of O / G outputs reads its C / G input channels
// alone (G = C: a depthwise convolution).
struct Conv2dOptions {
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
};

Tensor conv2d(const Tensor& x, const Tensor& filter, const Tensor& bias = {},
              const Conv2dOptions& options = {}, Loc loc = Loc::current());

// torch.nn.functional.conv1d: x [N, C, L], filter [O, C / groups, K], optional bias [O]; one
// number a dimension. Runs as conv2d over [N, C, 1, L] (its kernels, gradients and errors).
struct Conv1dOptions {
  int64_t stride = 1, padding = 0, dilation = 1, groups = 1;
};
Tensor conv1d(const Tensor& x, const Tensor& filter, const Tensor& bias = {}, const Conv1dOptions& options = {},
              Loc loc = Loc::current());

// torch.nn.functional.conv_transpose2d: x [N, I, H, W], filter [I, O / groups, KH, KW], optional
// bias [O]; the result [N, O, (H - 1) * stride - 2 * padding + dilation * (KH - 1) + outputPadding
// + 1, ...]: the gradient of the convolution with that filter from the result's shape to x's
// (`outputPadding`, below the stride, picks among the sizes that convolution maps to H).
struct ConvTranspose2dOptions {
  std::vector<int64_t> stride = {1, 1};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> outputPadding = {0, 0};
  std::vector<int64_t> dilation = {1, 1};
  int64_t groups = 1;
};
Tensor convTranspose2d(const Tensor& x, const Tensor& filter, const Tensor& bias = {},
                       const ConvTranspose2dOptions& options = {}, Loc loc = Loc::current());

struct BatchNormResult {
  Tensor y, mean, variance;  // mean and biased variance of the batch, per channel
};
// With `mask` ([N]: 1 for an example, 0 for a padding row), the statistics are the examples'
// alone (rows weighted by the mask), so a batch padded to the compiled shape normalizes as the
// unpadded one; the mask takes no gradient.
BatchNormResult batchNormTrain(const Tensor& x, const Tensor& scale, const Tensor& offset,
                               double epsilon, const Tensor& mask = {}, Loc loc = Loc::current());
Tensor batchNormInfer(const Tensor& x, const Tensor& scale, const Tensor& offset,
                      const Tensor& mean, const Tensor& variance, double epsilon,
                      Loc loc = Loc::current());

// 2-D pooling over the windows of an NCHW input (torch.nn.MaxPool2d / AvgPool2d). An empty
// stride means the window's size; padding must be smaller than the (dilated) window, and every
// window must hold an input element. Taps `dilation` apart (torch.nn.MaxPool2d's dilation; for
// either op). Average pooling divides by the full window size, padding counted as zeros
// (PyTorch's and Flax's default), or, with countIncludePad false, by the input elements the
// window holds (PyTorch's count_include_pad=False).
struct Pool2dOptions {
  std::vector<int64_t> window = {2, 2};
  std::vector<int64_t> stride = {};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> dilation = {1, 1};
  bool countIncludePad = true;
};
Tensor maxPool2d(const Tensor& x, const Pool2dOptions& options = {}, Loc loc = Loc::current());
Tensor avgPool2d(const Tensor& x, const Pool2dOptions& options = {}, Loc loc = Loc::current());

// Along one axis (negative counts from the end), the slice's maximum subtracted first.
Tensor softmax(const Tensor& x, int64_t axis = -1, Loc loc = Loc::current());
Tensor logSoftmax(const Tensor& x, int64_t axis = -1, Loc loc = Loc::current());

// Layer normalization over the last axis (torch.nn.functional.layer_norm with a [D] weight and
// bias): (x - mean) / sqrt(biased variance + epsilon) * scale + offset. Composed of mean, sub,
// mul, sqrt and div, so its gradient is theirs (and the elementwise parts fuse).
Tensor layerNorm(const Tensor& x, const Tensor& scale, const Tensor& offset, double epsilon = 1e-5,
                 Loc loc = Loc::current());

// Group normalization (torch.nn.functional.group_norm): x is [N, C, ...]; the C channels form
// `groups` groups of C / groups consecutive channels, each normalized over its channels and every
// position of one example, (x - mean) / sqrt(biased variance + epsilon), then scaled and offset
// per channel by [C] tensors. groups = 1 normalizes each example whole; groups = C is instance
// normalization. No statistics cross examples or replicas (no pmean under pmap, unlike
// batchNormTrain). Composed, as layerNorm is.
Tensor groupNorm(const Tensor& x, int64_t groups, const Tensor& scale, const Tensor& offset, double epsilon = 1e-5,
                 Loc loc = Loc::current());

// Elementwise binary ops broadcast NumPy-style (emitting explicit spmd.broadcast_in_dim).
Tensor add(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor sub(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor mul(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor div(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor maximum(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor minimum(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
// a^b, broadcast (torch.pow, jnp.power), as C's pow: NaN for a negative base and a non-integer
// exponent. Gradients as torch's: b a^(b - 1), 0 where b = 0; a^b log a, 0 where a = 0 and b >= 0.
Tensor pow(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor pow(const Tensor& a, double b, Loc loc = Loc::current());
// Masks: 1 where the relation holds, else 0, in the operands' float type (NaN compares false,
// notEqual true). Multiply by a mask to select; their gradient is zero.
Tensor greaterEqual(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor greater(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor lessEqual(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor less(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor equal(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
Tensor notEqual(const Tensor& a, const Tensor& b, Loc loc = Loc::current());
// With a scalar of x's dtype.
Tensor add(const Tensor& x, double c, Loc loc = Loc::current());
Tensor mul(const Tensor& x, double c, Loc loc = Loc::current());
Tensor neg(const Tensor& x, Loc loc = Loc::current());
Tensor exp(const Tensor& x, Loc loc = Loc::current());
Tensor log(const Tensor& x, Loc loc = Loc::current());
Tensor sqrt(const Tensor& x, Loc loc = Loc::current());
Tensor relu(const Tensor& x, Loc loc = Loc::current());
Tensor tanh(const Tensor& x, Loc loc = Loc::current());
Tensor sigmoid(const Tensor& x, Loc loc = Loc::current());
// |x| (+0 at -0); its gradient is sign(x), 0 at 0, as torch.abs.
Tensor abs(const Tensor& x, Loc loc = Loc::current());
// The exact GELU, x * Phi(x) (torch.nn.functional.gelu's default, jax.nn.gelu(approximate=False)).
Tensor gelu(const Tensor& x, Loc loc = Loc::current());
// Sine and cosine of x in radians (sinusoidal position encodings, rotary embeddings).
Tensor sin(const Tensor& x, Loc loc = Loc::current());
Tensor cos(const Tensor& x, Loc loc = Loc::current());
// log(1 + x) and e^x - 1 without their cancellation near 0 (torch.log1p, torch.expm1).
Tensor log1p(const Tensor& x, Loc loc = Loc::current());
Tensor expm1(const Tensor& x, Loc loc = Loc::current());
// The error function and its inverse (torch.erf, torch.erfinv): erfinv(erf(x)) = x,
// erfinv(+-1) = +-inf, NaN outside [-1, 1]; d erfinv(x) = sqrt(pi)/2 e^(erfinv(x)^2).
Tensor erf(const Tensor& x, Loc loc = Loc::current());
Tensor erfinv(const Tensor& x, Loc loc = Loc::current());
// Steps, of zero gradient (torch's and jax's): floor, ceil, round (to nearest, ties to even, as
// torch.round and jnp.round), sign (-1, 0 or 1; NaN and the zero's sign kept, as jnp.sign).
Tensor floor(const Tensor& x, Loc loc = Loc::current());
Tensor ceil(const Tensor& x, Loc loc = Loc::current());
Tensor round(const Tensor& x, Loc loc = Loc::current());
Tensor sign(const Tensor& x, Loc loc = Loc::current());
// A scalar as a tensor of x's dtype and shape (a splat constant).
Tensor fill(const Tensor& like, double value, Loc loc = Loc::current());

// x with another element type (f32, f64, i32), as astype: float to i32 rounds toward zero and
// saturates, NaN giving 0. The gradient of a float-to-float cast is cast back.
Tensor cast(const Tensor& x, DType dtype, Loc loc = Loc::current());
Tensor broadcastTo(const Tensor& x, const Shape& shape, Loc loc = Loc::current());
// The box [start, limit) of every dim (negative entries count from the end, as Python's).
Tensor slice(const Tensor& x, std::vector<int64_t> start, std::vector<int64_t> limit, Loc loc = Loc::current());
// Zeros added before (low) and after (high) every dim.
Tensor pad(const Tensor& x, const std::vector<int64_t>& low, const std::vector<int64_t>& high,
           Loc loc = Loc::current());
// The tensors joined along `axis` (negative counts from the end).
Tensor concat(const std::vector<Tensor>& xs, int64_t axis, Loc loc = Loc::current());
// onTrue where `condition` (a comparison's mask) is nonzero, else onFalse (jnp.where); the three
// broadcast together.
Tensor where(const Tensor& condition, const Tensor& onTrue, const Tensor& onFalse, Loc loc = Loc::current());
Tensor reshape(const Tensor& x, const Shape& shape, Loc loc = Loc::current());  // one -1 allowed
Tensor transpose(const Tensor& x, const std::vector<int64_t>& perm, Loc loc = Loc::current());

Tensor sum(const Tensor& x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor mean(const Tensor& x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor max(const Tensor& x, std::vector<int64_t> axes, Loc loc = Loc::current());
Tensor argmax(const Tensor& x, int64_t axis, Loc loc = Loc::current());
// The indices (i32, x's shape) that sort x along `axis`, stable (jnp.argsort, torch.argsort(stable=True)):
// ascending puts NaN last, descending puts it first (as torch's descending sort and topk); equal
// elements keep their order. No gradient (integers); sort and topK (frontend/Composed.h) gather by it.
Tensor argsort(const Tensor& x, int64_t axis = -1, bool descending = false, Loc loc = Loc::current());
// x, with no gradient flowing back through it (jax.lax.stop_gradient, torch's x.detach()): a
// target held fixed, a straight-through estimator's x + stopGradient(round(x) - x). Costs nothing
// at run time (the compiler removes it after differentiation). i32 tensors pass as they are.
Tensor stopGradient(const Tensor& x, Loc loc = Loc::current());

// [M, K] x [K, N], or batched [B, M, K] x [B, K, N] (torch.bmm); transposes apply to the last
// two dims; bias [N] is added to every row.
struct MatmulOptions {
  bool transposeLhs = false, transposeRhs = false;
};
Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias = {},
              const MatmulOptions& options = {}, Loc loc = Loc::current());
// Rows of `table` [V, D] at the i32 `ids` (any shape): [ids..., D]. An id outside [0, V) is a
// run-time error naming its position. The table's gradient sums the rows of repeated ids.
Tensor embedding(const Tensor& table, const Tensor& ids, Loc loc = Loc::current());
// x's elements at i32 `indices` along `axis` (numpy.take_along_axis, torch.gather(x, axis,
// indices)): indices has x's rank and x's sizes on the other axes, and the result its shape; an
// index outside [0, x.dim(axis)) is a run-time error naming its position. Negative axes count
// from the end. Its gradient adds each result gradient where its index points.
Tensor takeAlongAxis(const Tensor& x, const Tensor& indices, int64_t axis, Loc loc = Loc::current());
// x with each element of `updates` added where its i32 index points along `axis`
// (torch.scatter_add(x, axis, indices, updates), jnp's x.at[...].add along one axis): indices and
// updates have one shape, of x's rank and x's sizes on the other axes; repeated indices add up, in
// index order. An index outside [0, x.dim(axis)) is a run-time error naming its position.
Tensor scatterAdd(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis,
                  Loc loc = Loc::current());
// x with each element of `updates` written where its index points along `axis` (torch.scatter,
// jnp's x.at[...].set along one axis), operands as scatterAdd's. Where indices repeat, the last
// update in index order is written (torch and jax leave it unspecified); the gradient reaches x
// where nothing was written and each update that was written (jax's rule), no other.
Tensor scatter(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis, Loc loc = Loc::current());
// x's elements folded with the updates pointing at them by max / min (torch.scatter_reduce
// "amax" / "amin" with include_self, jnp's x.at[...].max / .min along one axis), operands as
// scatterAdd's; a NaN among them gives NaN. The gradient is shared evenly among the operands equal
// to the result, x's element included, as torch's. A segment max over ids: scatterMax of
// full(-inf) at the ids broadcast to the data's shape.
Tensor scatterMax(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis,
                  Loc loc = Loc::current());
Tensor scatterMin(const Tensor& x, const Tensor& indices, const Tensor& updates, int64_t axis,
                  Loc loc = Loc::current());
// Segment reductions (jax.ops.segment_sum / segment_max / segment_min): the rows of `data`
// [N, ...] whose i32 `segmentIds` [N] name one segment reduced into that segment's row of the
// result [segments, ...]. A segment no row names holds the reduction's identity (0, -inf, +inf),
// as jax's; an id outside [0, segments) is a run-time error naming its position (jax drops the
// row). scatterAdd / scatterMax / scatterMin along axis 0 at the ids broadcast to data's shape,
// with their gradients (sum in row order; ties of max and min share theirs evenly).
Tensor segmentSum(const Tensor& data, const Tensor& segmentIds, int64_t segments, Loc loc = Loc::current());
Tensor segmentMax(const Tensor& data, const Tensor& segmentIds, int64_t segments, Loc loc = Loc::current());
Tensor segmentMin(const Tensor& data, const Tensor& segmentIds, int64_t segments, Loc loc = Loc::current());

// Per-example loss: logits [N, C], labels [N] i32 -> [N].
Tensor softmaxCrossEntropy(const Tensor& logits, const Tensor& labels, Loc loc = Loc::current());

// Operators: a + b, a - b, a * b, a / b, -a, and with a number on either side. They broadcast as
// add/sub/mul/div do, and record the user's line: the left operand converts to `Operand`, whose
// default argument is evaluated where the expression is written.
struct Operand {
  const Tensor& tensor;
  Loc loc;
  Operand(const Tensor& t, Loc l = Loc::current()) : tensor(t), loc(l) {}  // NOLINT: implicit
};
inline Tensor operator+(Operand a, const Tensor& b) { return add(a.tensor, b, a.loc); }
inline Tensor operator-(Operand a, const Tensor& b) { return sub(a.tensor, b, a.loc); }
inline Tensor operator*(Operand a, const Tensor& b) { return mul(a.tensor, b, a.loc); }
inline Tensor operator/(Operand a, const Tensor& b) { return div(a.tensor, b, a.loc); }
inline Tensor operator-(Operand a) { return neg(a.tensor, a.loc); }
inline Tensor operator+(Operand a, double c) { return add(a.tensor, c, a.loc); }
inline Tensor operator-(Operand a, double c) { return add(a.tensor, -c, a.loc); }
inline Tensor operator*(Operand a, double c) { return mul(a.tensor, c, a.loc); }
inline Tensor operator/(Operand a, double c) { return mul(a.tensor, 1.0 / c, a.loc); }
inline Tensor operator+(double c, Operand a) { return add(a.tensor, c, a.loc); }
inline Tensor operator-(double c, Operand a) { return add(neg(a.tensor, a.loc), c, a.loc); }
inline Tensor operator*(double c, Operand a) { return mul(a.tensor, c, a.loc); }
inline Tensor operator/(double c, Operand a) { return div(fill(a.tensor, c, a.loc), a.tensor, a.loc); }

}  // namespace spmd
