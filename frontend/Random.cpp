// Keys on the host, and the traced random ops.
#include "frontend/Random.h"

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
  return trace.wrap(trace
                        .createWithType<ir::RandomUniformOp>(loc, detail::tensorType(dtype, shape),
                                                             trace.valueOf(key, loc))
                        ->getResult(0));
}

Tensor dropout(const Tensor& x, const Tensor& key, double rate, Loc loc) {
  if (!(rate >= 0 && rate < 1))
    throw Error(where(loc) + ": spmd::random::dropout: rate must be in [0, 1), got " + std::to_string(rate));
  if (rate == 0) return x;
  Tensor keep = greaterEqual(uniform(key, x.shape(), x.dtype(), loc), fill(x, rate, loc), loc);
  return mul(x, mul(keep, 1.0 / (1.0 - rate), loc), loc);
}

}  // namespace spmd::random
