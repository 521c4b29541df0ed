// Initializers: normal, Kaiming and LeCun normal, and constants, all f32.
#include "frontend/Init.h"

#include <cmath>

namespace spmd::init {
namespace {

Array sampleNormal(Rng& rng, const Shape& shape, double stddev) {
  Array a = Array::zeros(DType::f32, shape);
  std::normal_distribution<double> dist(0.0, stddev);
  for (float& v : a.values<float>()) v = static_cast<float>(dist(rng.engine()));
  return a;
}

// stddev sqrt(gain / fanIn), fanIn = the elements per output row (shape[0]).
Initializer scaledByFanIn(double gain) {
  return [gain](Rng& rng, const Shape& shape) {
    int64_t fanIn = shape.empty() ? 1 : numElements(shape) / shape[0];
    return sampleNormal(rng, shape, std::sqrt(gain / double(std::max<int64_t>(fanIn, 1))));
  };
}

}  // namespace

Initializer normal(double stddev) {
  return [stddev](Rng& rng, const Shape& shape) { return sampleNormal(rng, shape, stddev); };
}

Initializer kaimingNormal() { return scaledByFanIn(2.0); }
Initializer lecunNormal() { return scaledByFanIn(1.0); }

Initializer constant(double value) {
  return [value](Rng&, const Shape& shape) {
    Array a = Array::zeros(DType::f32, shape);
    for (float& v : a.values<float>()) v = static_cast<float>(value);
    return a;
  };
}

}  // namespace spmd::init
