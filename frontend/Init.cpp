// Initializers: normal, Kaiming and LeCun normal, and constants, all f32; uniform arrays.
#include "frontend/Init.h"

#include <cmath>
#include <string>

#include "runtime/base/Error.h"

namespace spmd {

Array uniformArray(Rng& rng, const Shape& shape, double bound, DType dtype, const char* what) {
  std::uniform_real_distribution<double> dist(-bound, bound);
  Array out = Array::zeros(dtype, shape);
  if (dtype == DType::f64)
    for (double& v : out.values<double>()) v = dist(rng.engine());
  else if (dtype == DType::f32)
    for (float& v : out.values<float>()) v = float(dist(rng.engine()));
  else
    throw Error(std::string(what) + " makes f32 or f64 parameters, not " + std::string(dtypeName(dtype)));
  return out;
}

}  // namespace spmd

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
