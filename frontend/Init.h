// Parameter initializers and the seeded random generator they draw from: the variance-scaling
// family of jax.nn.initializers (LeCun, He, Glorot; truncated normal, normal, uniform) and
// torch.nn.init's Kaiming normal, on weights laid out as PyTorch's.
#pragma once

#include <cstdint>
#include <functional>
#include <random>

#include "runtime/base/Array.h"

namespace spmd {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  std::mt19937_64& engine() { return engine_; }

 private:
  std::mt19937_64 engine_;
};

// Makes an f32 array of the given shape, one draw per element in row-major order.
using Initializer = std::function<Array(Rng&, const Shape&)>;

// Uniform in [-bound, bound], f32 or f64 (drawn in double, then rounded), one draw per element
// in row-major order; throws for another dtype, naming `what` (the caller's name for it).
Array uniformArray(Rng& rng, const Shape& shape, double bound, DType dtype, const char* what);

// The standard normal distribution's quantile (inverse CDF, scipy.stats.norm.ppf) at p in (0, 1),
// to double precision, tails included; -inf at 0, +inf at 1; throws for p outside [0, 1] or NaN.
double normalQuantile(double p);

namespace init {

// How variance scaling counts a weight's fans. Weights are laid out as PyTorch's, [out, in,
// k...]: fanIn = in x receptive field (the elements per output row), fanOut = out x receptive
// field, fanAvg their mean (ConvTranspose2d's [in, out / groups, k, k] counted the same way, as
// PyTorch does). A weight of rank below 2 has no fans: such an initializer throws for it.
enum class FanMode { fanIn, fanOut, fanAvg };
enum class Distribution { truncatedNormal, normal, uniform };

// jax.nn.initializers.variance_scaling: zero mean and variance scale / fan. truncatedNormal: a
// normal cut at two of its standard deviations, that deviation raised (/ 0.87962566103423978) so
// the variance is still scale / fan; uniform: in [-sqrt(3 scale / fan), sqrt(3 scale / fan)].
// torch.nn.Linear's and Conv2d's own default weights are varianceScaling(1.0 / 3, fanIn, uniform).
// Throws for a scale that is not positive and finite.
Initializer varianceScaling(double scale, FanMode mode, Distribution distribution);
// jax.nn.initializers.truncated_normal: normal numbers of deviation `stddev` kept within
// [lower, upper] deviations (drawn by the inverse CDF in double: exact in the far tails too,
// e.g. [5, 6]; bounds of no probability a double can hold, past about -37 or 37, are refused).
Initializer truncatedNormal(double stddev, double lower = -2.0, double upper = 2.0);
Initializer normal(double stddev);  // the seeds' Normal(0.01)
Initializer lecunNormal();          // jax's lecun_normal, Flax's default for Conv and Dense: truncated, variance 1 / fanIn
Initializer lecunUniform();         // jax's lecun_uniform: variance 1 / fanIn
Initializer heNormal();             // jax's he_normal: truncated, variance 2 / fanIn
Initializer heUniform();            // jax's he_uniform, torch's kaiming_uniform_: variance 2 / fanIn
Initializer glorotNormal();         // jax's glorot_normal: truncated, variance 2 / (fanIn + fanOut)
Initializer glorotUniform();        // jax's glorot_uniform, torch's xavier_uniform_
Initializer kaimingNormal();        // torch's kaiming_normal_ (He et al.): untruncated, stddev sqrt(2 / fanIn)
Initializer constant(double value);
inline Initializer zeros() { return constant(0.0); }
inline Initializer ones() { return constant(1.0); }
}  // namespace init

}  // namespace spmd
