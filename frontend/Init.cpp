// Initializers: variance scaling (truncated normal, normal, uniform), Kaiming normal, plain normal
// and constants, all f32; uniform arrays; the normal quantile the truncated normal draws through.
#include "frontend/Init.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <sstream>
#include <string>

#include "runtime/base/Elementwise.h"
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

// On the error function's inverses (runtime/base/Elementwise.h, the erfinv op's host formula):
// Phi^-1(p) = -sqrt 2 erfcinv(2p), each tail on its own distance from 0 or 1, which is exact.
double normalQuantile(double p) {
  if (!(p >= 0 && p <= 1)) throw Error("normalQuantile: p = " + std::to_string(p) + " is not a probability in [0, 1]");
  if (p == 0) return -std::numeric_limits<double>::infinity();
  if (p == 1) return std::numeric_limits<double>::infinity();
  constexpr double kRootTwo = std::numbers::sqrt2;
  if (p <= 0.25) return -kRootTwo * runtime::ew::erfcinvTail(2 * p);
  if (p >= 0.75) return kRootTwo * runtime::ew::erfcinvTail(2 * (1 - p));
  return kRootTwo * runtime::ew::erfinvCentral(2 * p - 1);
}

}  // namespace spmd

namespace spmd::init {
namespace {

// Fills an f32 array of `shape`, one draw of `draw` per element in row-major order.
template <typename Draw>
Array filled(const Shape& shape, Draw&& draw) {
  Array a = Array::zeros(DType::f32, shape);
  for (float& v : a.values<float>()) v = draw();
  return a;
}

Array sampleNormal(Rng& rng, const Shape& shape, double stddev) {
  std::normal_distribution<double> dist(0.0, stddev);
  return filled(shape, [&] { return static_cast<float>(dist(rng.engine())); });
}

// Normal numbers of deviation `stddev` within [lower, upper] deviations: u uniform over the
// interval's CDF values, then the quantile. An interval above 0 is drawn mirrored below it, where
// the CDF's small values keep their digits; the result is clipped into the bounds (as jax does),
// since rounding to f32 may step past them.
Array sampleTruncated(Rng& rng, const Shape& shape, double stddev, double lower, double upper) {
  const bool mirrored = lower >= 0;
  const double from = mirrored ? -upper : lower, to = mirrored ? -lower : upper;
  const double pFrom = runtime::ew::normalCdfOf(from), pTo = runtime::ew::normalCdfOf(to);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  const float lo = static_cast<float>(lower * stddev), hi = static_cast<float>(upper * stddev);
  return filled(shape, [&] {
    double z = INFINITY;  // drawn again where u's CDF value rounds to 0 or 1 (a bound at infinity)
    while (!std::isfinite(z)) z = normalQuantile(pFrom + dist(rng.engine()) * (pTo - pFrom));
    const float v = static_cast<float>((mirrored ? -z : z) * stddev);
    return std::min(std::max(v, lo), hi);
  });
}

std::string number(double v) {
  std::ostringstream text;
  text << v;
  return text.str();
}

void checkTruncation(double stddev, double lower, double upper) {
  const std::string call = "init::truncatedNormal(" + number(stddev) + ", " + number(lower) + ", " + number(upper) + ")";
  if (!(stddev > 0 && std::isfinite(stddev)))
    throw Error(call + ": the standard deviation must be positive and finite");
  if (std::isnan(lower) || std::isnan(upper) || !(lower < upper))
    throw Error(call + ": the bounds (in standard deviations) must satisfy lower < upper");
  const bool mirrored = lower >= 0;
  if (!(runtime::ew::normalCdfOf(mirrored ? -lower : upper) - runtime::ew::normalCdfOf(mirrored ? -upper : lower) > 0))
    throw Error(call + ": [lower, upper] holds no probability a double can represent (the normal CDF "
                "is 0 or 1 at both bounds); bring them within about 37 standard deviations of 0");
}

// fan of `shape` ([out, in, k...]) as `mode` counts it; throws for a rank below 2.
double fanOf(const Shape& shape, FanMode mode, const char* what) {
  if (shape.size() < 2)
    throw Error(std::string(what) + " counts fans over a weight laid out [out, in, k...], of rank 2 or more; " +
                shapeString(shape) + " has none (give a bias or a norm's scale a constant)");
  const double receptive = double(numElements(shape)) / double(shape[0] * shape[1]);
  const double in = double(shape[1]) * receptive, out = double(shape[0]) * receptive;
  return mode == FanMode::fanIn ? in : mode == FanMode::fanOut ? out : (in + out) / 2;
}

// The deviation of a standard normal cut at +-2 deviations.
constexpr double kTruncatedStddev = 0.87962566103423978;

}  // namespace

Initializer varianceScaling(double scale, FanMode mode, Distribution distribution) {
  if (!(scale > 0 && std::isfinite(scale)))
    throw Error("init::varianceScaling: the scale must be positive and finite, not " + number(scale));
  return [=](Rng& rng, const Shape& shape) {
    if (numElements(shape) == 0) return Array::zeros(DType::f32, shape);
    const double variance = scale / std::max(fanOf(shape, mode, "init::varianceScaling"), 1.0);
    switch (distribution) {
      case Distribution::truncatedNormal:
        return sampleTruncated(rng, shape, std::sqrt(variance) / kTruncatedStddev, -2.0, 2.0);
      case Distribution::normal:
        return sampleNormal(rng, shape, std::sqrt(variance));
      case Distribution::uniform:
        return uniformArray(rng, shape, std::sqrt(3 * variance), DType::f32, "init::varianceScaling");
    }
    throw Error("init::varianceScaling: unknown distribution");
  };
}

Initializer truncatedNormal(double stddev, double lower, double upper) {
  checkTruncation(stddev, lower, upper);
  return [=](Rng& rng, const Shape& shape) { return sampleTruncated(rng, shape, stddev, lower, upper); };
}

Initializer normal(double stddev) {
  if (!(stddev >= 0) || !std::isfinite(stddev))
    throw Error("init::normal: the deviation must be >= 0 and finite, not " + number(stddev));
  return [stddev](Rng& rng, const Shape& shape) { return sampleNormal(rng, shape, stddev); };
}

Initializer lecunNormal() { return varianceScaling(1.0, FanMode::fanIn, Distribution::truncatedNormal); }
Initializer lecunUniform() { return varianceScaling(1.0, FanMode::fanIn, Distribution::uniform); }
Initializer heNormal() { return varianceScaling(2.0, FanMode::fanIn, Distribution::truncatedNormal); }
Initializer heUniform() { return varianceScaling(2.0, FanMode::fanIn, Distribution::uniform); }
Initializer glorotNormal() { return varianceScaling(1.0, FanMode::fanAvg, Distribution::truncatedNormal); }
Initializer glorotUniform() { return varianceScaling(1.0, FanMode::fanAvg, Distribution::uniform); }
Initializer kaimingNormal() { return varianceScaling(2.0, FanMode::fanIn, Distribution::normal); }

Initializer constant(double value) {
  return [value](Rng&, const Shape& shape) {
    Array a = Array::zeros(DType::f32, shape);
    for (float& v : a.values<float>()) v = static_cast<float>(value);
    return a;
  };
}

}  // namespace spmd::init
