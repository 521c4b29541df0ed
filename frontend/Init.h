// Parameter initializers and the seeded random generator they draw from.
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

// Makes an f32 array of the given shape. fanIn = product of all dims but the first.
using Initializer = std::function<Array(Rng&, const Shape&)>;

// Uniform in [-bound, bound], f32 or f64 (drawn in double, then rounded), one draw per element
// in row-major order; throws for another dtype, naming `what` (the caller's name for it).
Array uniformArray(Rng& rng, const Shape& shape, double bound, DType dtype, const char* what);

namespace init {
Initializer normal(double stddev);  // the seeds' Normal(0.01)
Initializer kaimingNormal();        // He et al.: stddev sqrt(2 / fanIn)
Initializer lecunNormal();          // stddev sqrt(1 / fanIn), Flax's default for Conv and Dense
Initializer constant(double value);
inline Initializer zeros() { return constant(0.0); }
inline Initializer ones() { return constant(1.0); }
}  // namespace init

}  // namespace spmd
