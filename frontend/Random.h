// Randomness inside traced functions, as jax.random: a key (an i32[2] tensor) names a stream of
// Philox4x32-10 numbers (runtime/base/Philox.h); the same key gives the same numbers on every
// backend and thread count. Derive keys with foldIn, never reuse one key for two purposes.
// Under pmap, foldIn(key, axisIndex("batch")) gives each replica its own stream, a function of
// (key, global replica index) only, so it does not depend on how replicas map to threads or
// processes; fold in the step too (foldIn(key, step) on the host) for a new mask every step.
#pragma once

#include <cstdint>
#include <vector>

#include "frontend/Tensor.h"

namespace spmd::random {

// A key from a seed (jax.random.PRNGKey): i32[2], the seed's low and high 32 bits.
Array key(uint64_t seed);
// On the host: the key derived from `key` and `data`; equal to the traced foldIn's result.
Array foldIn(const Array& key, uint32_t data);
// On the host: n independent keys derived from `key` (jax.random.split).
std::vector<Array> split(const Array& key, int n);

// Traced: the key derived from `key` and a rank-0 i32 tensor (axisIndex, a step argument).
Tensor foldIn(const Tensor& key, const Tensor& data, Loc loc = Loc::current());
// Traced: uniform numbers in [0, 1) of the given shape and float dtype.
Tensor uniform(const Tensor& key, const Shape& shape, DType dtype = DType::f32, Loc loc = Loc::current());
// Traced: standard normal numbers (mean 0, variance 1) of the given shape and float dtype, by
// Box-Muller on two uniform numbers per element: element i is a function of the key and i alone
// (a smaller draw is a prefix of a larger one). The tails stop where the uniform numbers' grid
// does: |z| < 5.8 in f32, < 8.6 in f64. Scale and shift for other means and deviations.
Tensor normal(const Tensor& key, const Shape& shape, DType dtype = DType::f32, Loc loc = Loc::current());
// Traced: standard normal numbers kept within (lower, upper) (jax.random.truncated_normal; scale by
// a deviation for others), by jax's formula: u uniform between erf(lower / sqrt 2) and
// erf(upper / sqrt 2) (those two in double on the host), then sqrt 2 erfinv(u), clipped inside the
// bounds. The dtype's grid of u near +-1 limits the tails: an interval in which fewer than 1024 u
// values of the drawn dtype lie (an f32 tail beyond about 4 deviations, f64 beyond about 7) is refused;
// draw in f64, or initialize parameters on the host with init::truncatedNormal, exact in any tail.
Tensor truncatedNormal(const Tensor& key, double lower, double upper, const Shape& shape, DType dtype = DType::f32,
                       Loc loc = Loc::current());
// Traced: a mask of the given shape and float dtype, 1 with probability p (0 <= p <= 1), else 0
// (jax.random.bernoulli, as 1/0 in the float type as spmd's comparisons give).
Tensor bernoulli(const Tensor& key, double p, const Shape& shape, DType dtype = DType::f32,
                 Loc loc = Loc::current());
// Traced: i32 indices drawn along `axis` of `logits` (unnormalized log-probabilities) with
// probabilities softmax(logits) (jax.random.categorical): the argmax of logits plus Gumbel
// noise. The result drops `axis`; -inf logits are never drawn.
Tensor categorical(const Tensor& key, const Tensor& logits, int64_t axis = -1, Loc loc = Loc::current());
// Traced: gamma(alpha) numbers (shape alpha > 0, scale 1; jax.random.gamma with one alpha:
// multiply by a scale for others) of the given shape and float dtype, by Marsaglia and Tsang's
// method: each element takes the first of 16 candidates (a normal and a uniform number each) the
// method accepts, at least 95% of them; all 16 rejected, below 1e-21 an element, takes the first.
// For alpha < 1 a gamma(alpha + 1) number times u^(1 / alpha). No gradient: alpha is a number,
// and the draw depends on the key alone. Small alphas underflow to 0 in f32 (gamma(0.01) below
// 1e-38 with probability 0.4): draw in f64, or take beta and dirichlet, which stay in log space.
Tensor gamma(const Tensor& key, double alpha, const Shape& shape, DType dtype = DType::f32, Loc loc = Loc::current());
// Traced: beta(a, b) numbers in [0, 1] (jax.random.beta): X / (X + Y) of gamma(a) and gamma(b)
// draws, as sigmoid(log X - log Y) so that neither underflow nor two zeros make a NaN (mixup's
// beta(0.2, 0.2) in f32 included).
Tensor beta(const Tensor& key, double a, double b, const Shape& shape, DType dtype = DType::f32,
            Loc loc = Loc::current());
// Traced: dirichlet(alpha) draws (jax.random.dirichlet): shape + [alpha.size()], each row the
// gamma(alpha_j) draws divided by their sum (a softmax of their logarithms), summing to 1.
Tensor dirichlet(const Tensor& key, const std::vector<double>& alpha, const Shape& shape, DType dtype = DType::f32,
                 Loc loc = Loc::current());
// Traced: a random order of 0 .. n-1 as i32[n] (jax.random.permutation(key, n)): the argsort of
// n uniform f64 numbers (ties, below n^2 / 2^54 in probability, keep index order).
Tensor permutation(const Tensor& key, int64_t n, Loc loc = Loc::current());
// Inverted dropout: each element is zeroed with probability `rate` (0 <= rate < 1), the others
// scaled by 1 / (1 - rate), as torch.nn.functional.dropout in training mode.
Tensor dropout(const Tensor& x, const Tensor& key, double rate, Loc loc = Loc::current());

}  // namespace spmd::random
