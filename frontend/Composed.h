// DSL functions composed of the dialect's ops, with no kernels of their own: activations
// (torch.nn.functional's), reductions and indexing. Their gradients are their parts' VJPs; each
// is written so that neither its value nor its gradient overflows where the function does not
// (softplus through log1p(e^-|x|), elu's exponential only of min(x, 0)). Checked against the
// exact values and PyTorch's in ElementwiseTorchTest, TorchReferenceTest and ComposedTorchTest.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// x * sigmoid(x) (torch's SiLU, also called swish).
Tensor silu(const Tensor& x, Loc loc = Loc::current());
// log(1 + e^x), as max(x, 0) + log1p(e^-|x|) (torch.nn.functional.softplus with beta 1).
Tensor softplus(const Tensor& x, Loc loc = Loc::current());
// log(sigmoid(x)) = -softplus(-x), finite for every finite x (torch.nn.functional.logsigmoid).
Tensor logSigmoid(const Tensor& x, Loc loc = Loc::current());
// x where x > 0, else slope * x (torch.nn.functional.leaky_relu; its gradient at 0 is the slope, as torch's).
Tensor leakyRelu(const Tensor& x, double slope = 0.01, Loc loc = Loc::current());
// x where x > 0, else alpha * (e^x - 1) (torch.nn.functional.elu).
Tensor elu(const Tensor& x, double alpha = 1.0, Loc loc = Loc::current());
// x * tanh(softplus(x)) (torch.nn.functional.mish).
Tensor mish(const Tensor& x, Loc loc = Loc::current());
// min(max(x, low), high) (torch.clamp with both bounds; low <= high, else an error at your line).
// The gradient passes where low <= x <= high, as torch's.
Tensor clamp(const Tensor& x, double low, double high, Loc loc = Loc::current());

// The smallest element over `axes` (removed from the shape, as `max`); its gradient goes to the
// first smallest element, a NaN to the first NaN.
Tensor min(const Tensor& x, std::vector<int64_t> axes, Loc loc = Loc::current());
// log(sum(e^x)) over `axes` without overflow (torch.logsumexp): the largest finite element is
// taken out first; all -inf gives -inf, an inf gives inf. Its gradient is the softmax over `axes`.
Tensor logsumexp(const Tensor& x, std::vector<int64_t> axes, Loc loc = Loc::current());

// The index of the first smallest element along `axis` (i32; a NaN counts as the smallest, as
// torch.argmin's and jnp.argmin's).
Tensor argmin(const Tensor& x, int64_t axis, Loc loc = Loc::current());
// x sorted along `axis` (jnp.sort, torch.sort(stable=True).values): takeAlongAxis by argsort, so
// its gradient goes back to each element's place.
Tensor sort(const Tensor& x, int64_t axis = -1, bool descending = false, Loc loc = Loc::current());
// The k largest elements along the last axis, largest first, and their i32 indices (torch.topk,
// jax.lax.top_k): equal elements lower index first (jax's order; torch.topk's is unspecified), NaN
// counts as the largest (torch's). 0 <= k <= extent,
// else an error at your line. The values' gradient goes back to the chosen elements.
struct TopK {
  Tensor values, indices;
};
TopK topK(const Tensor& x, int64_t k, Loc loc = Loc::current());
// The variance over `axes` (removed), sum((x - mean)^2) / (n - correction): correction 1 is
// torch.var's default (unbiased), 0 jnp.var's. n <= correction is an error at your line.
Tensor variance(const Tensor& x, std::vector<int64_t> axes, int64_t correction = 1, Loc loc = Loc::current());
// sqrt(variance(x, axes, correction)) (torch.std); its gradient is infinite where every element is equal.
Tensor stddev(const Tensor& x, std::vector<int64_t> axes, int64_t correction = 1, Loc loc = Loc::current());

// Nearest-neighbour upsampling of [N, C, H, W] by whole factors: [N, C, H * sh, W * sw], each
// pixel repeated (F.interpolate(mode="nearest", scale_factor=(sh, sw))). The gradient sums each
// output block back into its pixel.
Tensor upsampleNearest2d(const Tensor& x, int64_t scaleH, int64_t scaleW, Loc loc = Loc::current());

// Per-example loss with label smoothing (torch's CrossEntropyLoss(label_smoothing), reduction
// none): (1 - smoothing) * softmaxCrossEntropy(logits, labels) + smoothing * the mean over the
// classes of -logSoftmax(logits). logits [N, C], labels [N] i32; smoothing in [0, 1].
Tensor softmaxCrossEntropy(const Tensor& logits, const Tensor& labels, double labelSmoothing,
                           Loc loc = Loc::current());

// The running sum along `axis` (torch.cumsum, jnp.cumsum): element i is the sum of elements
// 0..i. Made of ceil(log2 n) shifted adds (Hillis and Steele's scan: each prefix summed as a tree,
// not left to right), so its gradient, the reversed running sum of the cotangent, comes from
// the parts' VJPs. Float types only (cast integers first).
Tensor cumsum(const Tensor& x, int64_t axis, Loc loc = Loc::current());
// i32 `labels` [...] as [..., classes] rows of 1 at the label and 0 elsewhere, in `dtype`
// (jax.nn.one_hot, torch.nn.functional.one_hot's values). A label outside [0, classes) is a
// run-time error naming its position, as `takeAlongAxis`'s (jax would give a row of zeros).
Tensor oneHot(const Tensor& labels, int64_t classes, DType dtype = DType::f32, Loc loc = Loc::current());
// 0, 1, ..., n - 1 in `dtype` (jnp.arange, torch.arange): a concrete value, a constant where a
// traced function uses it. i32, f32 or f64; n from 0 to 2^31 - 1 (f32 holds it exactly to 2^24).
Tensor arange(int64_t n, DType dtype = DType::i32, Loc loc = Loc::current());
}  // namespace spmd
