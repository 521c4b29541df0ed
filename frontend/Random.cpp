// Keys on the host, and the traced random ops.
#include "frontend/Random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "ir/SpmdDialect.h"
#include "runtime/base/Philox.h"

namespace spmd::random {
namespace philox = runtime::philox;
using detail::Trace;
using detail::where;

namespace {

Array keyArray(uint32_t k0, uint32_t k1) {
  return Array::of<int32_t>({2}, std::vector<int32_t>{int32_t(k0), int32_t(k1)});
}

// The key's two words; throws unless it is an i32[2] array.
std::pair<uint32_t, uint32_t> words(const Array& key, const char* who) {
  if (key.dtype != DType::i32 || key.shape != Shape{2})
    throw Error(std::string("spmd::random::") + who + ": a key is an i32[2] array (from random::key), got " +
                std::string(dtypeName(key.dtype)) + shapeString(key.shape));
  return {uint32_t(key.values<int32_t>()[0]), uint32_t(key.values<int32_t>()[1])};
}

}  // namespace

Array key(uint64_t seed) { return keyArray(uint32_t(seed), uint32_t(seed >> 32)); }

Array foldIn(const Array& key, uint32_t data) {
  auto [k0, k1] = words(key, "foldIn");
  uint32_t k[2] = {k0, k1}, derived[2];
  philox::foldIn(k, data, derived);
  return keyArray(derived[0], derived[1]);
}

std::vector<Array> split(const Array& key, int n) {
  auto [k0, k1] = words(key, "split");
  if (n < 1) throw Error("spmd::random::split: n must be >= 1, got " + std::to_string(n));
  std::vector<Array> keys;
  for (int j = 0; j < n; ++j) {
    philox::Words r = philox::philox4x32(philox::Words{{uint32_t(j), 0, 0, philox::kSplitTag}}, k0, k1);
    keys.push_back(keyArray(r.w[0], r.w[1]));
  }
  return keys;
}

Tensor foldIn(const Tensor& key, const Tensor& data, Loc loc) {
  Trace& trace = Trace::current("random::foldIn", loc);
  return trace.wrap(
      trace.create<ir::RandomFoldInOp>(loc, trace.valueOf(key, loc), trace.valueOf(data, loc))->getResult(0));
}

Tensor uniform(const Tensor& key, const Shape& shape, DType dtype, Loc loc) {
  Trace& trace = Trace::current("random::uniform", loc);
  if (dtype == DType::i32)
    throw Error(where(loc) + ": spmd::random::uniform: dtype must be f32 or f64, got i32");
  for (int64_t d : shape)
    if (d < 0)
      throw Error(where(loc) + ": spmd::random::uniform: shape " + shapeString(shape) + " has a negative extent");
  return trace.wrap(trace
                        .createWithType<ir::RandomUniformOp>(loc, detail::tensorType(dtype, shape),
                                                             trace.valueOf(key, loc))
                        ->getResult(0));
}

namespace {

// The shape's element count; throws naming `who` for a negative extent.
int64_t elementsOf(const Shape& shape, const char* who, Loc loc) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw Error(where(loc) + ": spmd::random::" + who + ": shape " + shapeString(shape) +
                  " has a negative extent");
    n *= d;
  }
  return n;
}

// The dtype the numbers are drawn in: f32 for bf16 (whose rounding of a uniform number may reach
// 1), whose results are rounded to bf16 once at the end.
DType drawnIn(DType dtype, const char* who, Loc loc) {
  if (dtype == DType::i32)
    throw Error(where(loc) + ": spmd::random::" + who + ": dtype must be f32, f64 or bf16, got i32");
  return dtype == DType::f64 ? DType::f64 : DType::f32;
}

Tensor castTo(const Tensor& x, DType dtype, Loc loc) { return x.dtype() == dtype ? x : cast(x, dtype, loc); }

}  // namespace

namespace {

// Box-Muller's normal number from uniform numbers u and v (one shape): z = sqrt(-2 log(1 - u))
// cos(2 pi v), with 1 - u in (0, 1] so that the logarithm is finite.
Tensor boxMuller(const Tensor& u, const Tensor& v, Loc loc) {
  Tensor radius = sqrt(mul(log(sub(fill(u, 1.0, loc), u, loc), loc), -2.0, loc), loc);
  return mul(radius, cos(mul(v, 6.283185307179586476925, loc), loc), loc);
}

}  // namespace

Tensor normal(const Tensor& key, const Shape& shape, DType dtype, Loc loc) {
  const DType drawn = drawnIn(dtype, "normal", loc);
  const int64_t n = elementsOf(shape, "normal", loc);
  // Element i takes uniform numbers 2i and 2i + 1.
  Tensor u = uniform(key, {n, 2}, drawn, loc);
  Tensor first = reshape(slice(u, {0, 0}, {n, 1}, loc), shape, loc);
  Tensor second = reshape(slice(u, {0, 1}, {n, 2}, loc), shape, loc);
  return castTo(boxMuller(first, second, loc), dtype, loc);
}

namespace {

constexpr int64_t kGammaCandidates = 16;

// Rows of uniform numbers a gamma draw of n elements takes: [3 x 16 + 1, n] (logGamma says which).
constexpr int64_t kGammaRows = 3 * kGammaCandidates + 1;

// The logarithms of n gamma(alpha) numbers ([n]) from their uniform numbers u ([rows, n]):
// rows 0-15 and 16-31 the candidates' normal numbers z, rows 32-47 their acceptance's uniform
// numbers, row 48 alpha < 1's u. Marsaglia and Tsang (2000), for a = alpha (or alpha + 1 below 1):
// d = a - 1/3, c = 1 / sqrt(9 d), v = (1 + c z)^3, accepted where v > 0 and
// log(1 - u) < z^2 / 2 + d - d v + d log v; the draw is d v.
Tensor logGamma(const Tensor& u, double alpha, int64_t n, Loc loc) {
  const int64_t k = kGammaCandidates;
  auto rows = [&](int64_t from, int64_t to) { return slice(u, {from, 0}, {to, n}, loc); };
  const double a = alpha < 1 ? alpha + 1 : alpha, d = a - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  Tensor z = boxMuller(rows(0, k), rows(k, 2 * k), loc);
  Tensor t = add(mul(z, c, loc), 1.0, loc);
  Tensor v = mul(mul(t, t, loc), t, loc);
  // log v where v > 0; elsewhere a finite stand-in, never chosen unless every candidate is rejected.
  const double tiny = u.dtype() == DType::f32 ? 1.17549435e-38 : 2.2250738585072014e-308;
  Tensor logV = log(maximum(v, fill(v, tiny, loc), loc), loc);
  Tensor bound = add(sub(add(mul(mul(z, z, loc), 0.5, loc), d, loc), mul(v, d, loc), loc), mul(logV, d, loc), loc);
  Tensor w = rows(2 * k, 3 * k);
  Tensor logW = log(sub(fill(w, 1.0, loc), w, loc), loc);
  Tensor accepted = mul(greater(v, fill(v, 0.0, loc), loc), less(logW, bound, loc), loc);  // 1 where both hold
  Tensor first = reshape(argmax(accepted, 0, loc), {1, n}, loc);                          // the first 1, or 0
  Tensor logX = reshape(takeAlongAxis(add(logV, std::log(d), loc), first, 0, loc), {n}, loc);
  if (alpha >= 1) return logX;
  Tensor boost = reshape(rows(3 * k, 3 * k + 1), {n}, loc);
  return add(logX, mul(log(sub(fill(boost, 1.0, loc), boost, loc), loc), 1 / alpha, loc), loc);
}

// The logarithms of gamma(alpha_j) draws for each j: [alpha.size(), n], in the drawn dtype.
Tensor logGammas(const Tensor& key, const std::vector<double>& alpha, int64_t n, DType drawn, const char* who, Loc loc) {
  for (double a : alpha)
    if (!(a > 0) || !std::isfinite(a))
      throw Error(where(loc) + ": spmd::random::" + who + ": every alpha must be a finite number > 0, got " +
                  std::to_string(a));
  const int64_t count = int64_t(alpha.size());
  Tensor u = uniform(key, {count, kGammaRows, n}, drawn, loc);
  std::vector<Tensor> logs;
  for (int64_t j = 0; j < count; ++j)
    logs.push_back(reshape(logGamma(reshape(slice(u, {j, 0, 0}, {j + 1, kGammaRows, n}, loc), {kGammaRows, n}, loc),
                                    alpha[size_t(j)], n, loc),
                           {1, n}, loc));
  return count == 1 ? logs[0] : concat(logs, 0, loc);
}

}  // namespace

Tensor gamma(const Tensor& key, double alpha, const Shape& shape, DType dtype, Loc loc) {
  const DType drawn = drawnIn(dtype, "gamma", loc);
  const int64_t n = elementsOf(shape, "gamma", loc);
  return castTo(reshape(exp(logGammas(key, {alpha}, n, drawn, "gamma", loc), loc), shape, loc), dtype, loc);
}

Tensor beta(const Tensor& key, double a, double b, const Shape& shape, DType dtype, Loc loc) {
  const DType drawn = drawnIn(dtype, "beta", loc);
  const int64_t n = elementsOf(shape, "beta", loc);
  Tensor logs = logGammas(key, {a, b}, n, drawn, "beta", loc);
  Tensor difference = sub(slice(logs, {0, 0}, {1, n}, loc), slice(logs, {1, 0}, {2, n}, loc), loc);
  return castTo(reshape(sigmoid(difference, loc), shape, loc), dtype, loc);
}

Tensor dirichlet(const Tensor& key, const std::vector<double>& alpha, const Shape& shape, DType dtype, Loc loc) {
  const DType drawn = drawnIn(dtype, "dirichlet", loc);
  const int64_t n = elementsOf(shape, "dirichlet", loc);
  if (alpha.empty()) throw Error(where(loc) + ": spmd::random::dirichlet: alpha is empty; give one alpha per component");
  Shape out = shape;
  out.push_back(int64_t(alpha.size()));
  Tensor logs = transpose(logGammas(key, alpha, n, drawn, "dirichlet", loc), {1, 0}, loc);  // [n, components]
  return castTo(reshape(softmax(logs, 1, loc), out, loc), dtype, loc);
}

Tensor truncatedNormal(const Tensor& key, double lower, double upper, const Shape& shape, DType dtype, Loc loc) {
  const DType drawn = drawnIn(dtype, "truncatedNormal", loc);
  elementsOf(shape, "truncatedNormal", loc);
  const std::string what = where(loc) + ": spmd::random::truncatedNormal(" + std::to_string(lower) + ", " +
                           std::to_string(upper) + ")";
  if (std::isnan(lower) || std::isnan(upper) || !(lower < upper))
    throw Error(what + ": the bounds must satisfy lower < upper");
  const double from = std::erf(lower / std::numbers::sqrt2), to = std::erf(upper / std::numbers::sqrt2);
  // The values u can take in [from, to): the drawn dtype's spacing where it is coarsest, at the end nearer +-1.
  const double widest = std::max(std::fabs(from), std::fabs(to));
  const double spacing = drawn == DType::f32 ? double(std::nextafter(float(widest), 2.0f)) - double(float(widest))
                                             : std::nextafter(widest, 2.0) - widest;
  if (!((to - from) / spacing >= 1024))
    throw Error(what + ": in " + std::string(dtypeName(drawn)) + " the uniform numbers this draws through erfinv " +
                "take only " + std::to_string(int64_t((to - from) / spacing)) + " values between erf(lower / sqrt 2) and " +
                "erf(upper / sqrt 2), too few to follow the distribution; draw in f64, or initialize on the host " +
                "with spmd::init::truncatedNormal, exact in any tail");
  Tensor u = uniform(key, shape, drawn, loc);
  Tensor z = mul(erfinv(add(mul(u, to - from, loc), from, loc), loc), std::numbers::sqrt2, loc);
  // Inside the open interval, as jax: the next numbers of the dtype past the bounds.
  const double low = drawn == DType::f32 ? double(std::nextafter(float(lower), INFINITY)) : std::nextafter(lower, INFINITY);
  const double high = drawn == DType::f32 ? double(std::nextafter(float(upper), -INFINITY)) : std::nextafter(upper, -INFINITY);
  return castTo(minimum(maximum(z, fill(z, low, loc), loc), fill(z, high, loc), loc), dtype, loc);
}

Tensor permutation(const Tensor& key, int64_t n, Loc loc) {
  elementsOf({n}, "permutation", loc);
  if (n > int64_t(INT32_MAX))
    throw Error(where(loc) + ": spmd::random::permutation: n = " + std::to_string(n) + " exceeds i32's indices");
  return argsort(uniform(key, {n}, DType::f64, loc), 0, false, loc);
}

Tensor bernoulli(const Tensor& key, double p, const Shape& shape, DType dtype, Loc loc) {
  const DType drawn = drawnIn(dtype, "bernoulli", loc);
  elementsOf(shape, "bernoulli", loc);
  if (!(p >= 0 && p <= 1))
    throw Error(where(loc) + ": spmd::random::bernoulli: p must be in [0, 1], got " + std::to_string(p));
  Tensor u = uniform(key, shape, drawn, loc);
  return castTo(less(u, fill(u, p, loc), loc), dtype, loc);  // u < p: probability p, u uniform on [0, 1)
}

Tensor categorical(const Tensor& key, const Tensor& logits, int64_t axis, Loc loc) {
  const DType drawn = drawnIn(logits.dtype(), "categorical", loc);
  const int64_t rank = int64_t(logits.shape().size());
  if (axis < -rank || axis >= rank)
    throw Error(where(loc) + ": spmd::random::categorical: axis " + std::to_string(axis) + " is out of range for logits " +
                shapeString(logits.shape()));
  // Gumbel noise -log(-log(u)) with u kept off 0 (the smallest normal number, as jax does), so
  // every draw is finite.
  Tensor u = uniform(key, logits.shape(), drawn, loc);
  u = maximum(u, fill(u, drawn == DType::f32 ? 1.17549435e-38 : 2.2250738585072014e-308, loc), loc);
  Tensor gumbel = neg(log(neg(log(u, loc), loc), loc), loc);
  return argmax(add(castTo(logits, drawn, loc), gumbel, loc), axis, loc);
}

Tensor dropout(const Tensor& x, const Tensor& key, double rate, Loc loc) {
  if (!(rate >= 0 && rate < 1))
    throw Error(where(loc) + ": spmd::random::dropout: rate must be in [0, 1), got " + std::to_string(rate));
  if (rate == 0) return x;
  Tensor keep = greaterEqual(uniform(key, x.shape(), x.dtype(), loc), fill(x, rate, loc), loc);
  return mul(x, mul(keep, 1.0 / (1.0 - rate), loc), loc);
}

}  // namespace spmd::random
