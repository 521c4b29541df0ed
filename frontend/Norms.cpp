// The norms of frontend/Norms.h. Where the sum under a root is 0 the root is taken of 1 and the
// result selected to 0, so its gradient there is 0 (the formula's x / ||x|| would be 0 / 0).
#include "frontend/Norms.h"

#include <cmath>
#include <string>

#include "frontend/Checks.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "runtime/base/Error.h"

namespace spmd {

using detail::where;

namespace {

using detail::calledAt;
using detail::checkedAxis;
using detail::requireFloat;

// s^(1 / ord) of a sum s >= 0, with 0 (and a zero gradient) where s is 0.
Tensor rootOf(const Tensor& s, double ord, Loc loc) {
  const Tensor zero = fill(s, 0.0, loc), positive = greater(s, zero, loc);
  const Tensor safe = where(positive, s, fill(s, 1.0, loc), loc);
  const Tensor root = ord == 2.0 ? sqrt(safe, loc) : pow(safe, 1.0 / ord, loc);
  return where(positive, root, zero, loc);
}

}  // namespace

Tensor vectorNorm(const Tensor& x, std::vector<int64_t> axes, double ord, bool keepDims, Loc loc) {
  const char* name = "vectorNorm";
  requireFloat(x, "x", name, loc);
  if (!(ord > 0))
    throw Error(calledAt(name, loc) + "ord must be positive (1, 2, any other, or infinity), got " + std::to_string(ord));
  Shape kept = x.shape();
  for (int64_t& axis : axes) axis = checkedAxis(x, axis, name, loc), kept[size_t(axis)] = 1;
  Tensor norm;
  if (std::isinf(ord)) norm = max(abs(x, loc), axes, loc);
  else if (ord == 1.0) norm = sum(abs(x, loc), axes, loc);
  else if (ord == 2.0) norm = rootOf(sum(mul(x, x, loc), axes, loc), 2.0, loc);
  else norm = rootOf(sum(pow(abs(x, loc), ord, loc), axes, loc), ord, loc);
  return keepDims ? reshape(norm, kept, loc) : norm;
}

Tensor normalize(const Tensor& x, double p, int64_t axis, double epsilon, Loc loc) {
  const char* name = "normalize";
  requireFloat(x, "x", name, loc);
  if (!(epsilon > 0)) throw Error(calledAt(name, loc) + "epsilon must be positive, got " + std::to_string(epsilon));
  const Tensor norm = vectorNorm(x, {checkedAxis(x, axis, name, loc)}, p, true, loc);
  return div(x, maximum(norm, fill(norm, epsilon, loc), loc), loc);
}

Tensor cosineSimilarity(const Tensor& a, const Tensor& b, int64_t axis, double epsilon, Loc loc) {
  const char* name = "cosineSimilarity";
  requireFloat(a, "a", name, loc);
  if (b.dtype() != a.dtype() || b.shape() != a.shape())
    throw Error(calledAt(name, loc) + "b " + b.typeString() + " and a " + a.typeString() +
                " differ; give two tensors of one dtype and shape (broadcastTo the smaller one)");
  const int64_t along = checkedAxis(a, axis, name, loc);
  auto unit = [&](const Tensor& v) {
    const Tensor norm = vectorNorm(v, {along}, 2.0, true, loc);
    return div(v, maximum(norm, fill(norm, epsilon, loc), loc), loc);
  };
  return sum(mul(unit(a), unit(b), loc), {along}, loc);
}

}  // namespace spmd
