// Reference convert: each element through double, then to the result type; to i32 rounding
// toward zero and saturating, NaN giving 0; to bf16 through f32 (runtime/base/BFloat16.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {
namespace {

double load(const TensorView& x, int64_t i) {
  switch (x.dtype) {
    case DType::f32: return x.as<float>()[i];
    case DType::f64: return x.as<double>()[i];
    case DType::i32: return x.as<int32_t>()[i];
    case DType::bf16: return fromBf16(x.as<bf16>()[i]);
  }
  return 0;
}

}  // namespace

void convert(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = load(x, i);
    switch (y.dtype) {
      case DType::f32: y.as<float>()[i] = static_cast<float>(v); break;
      case DType::f64: y.as<double>()[i] = v; break;
      case DType::bf16: y.as<bf16>()[i] = toBf16(static_cast<float>(v)); break;
      case DType::i32: {
        double lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
        y.as<int32_t>()[i] = std::isnan(v) ? 0 : static_cast<int32_t>(std::trunc(std::clamp(v, lo, hi)));
        break;
      }
    }
  }
}

}  // namespace spmd::runtime::reference
