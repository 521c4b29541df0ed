// Reference random_uniform and random_fold_in: the generator's definition (runtime/base/
// Philox.h, checked against the Random123 known-answer vectors) evaluated element by element.
#include "runtime/base/Philox.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {

void random_uniform(KernelCall& call) {
  const auto* key = call.in[0].as<int32_t>();
  uint32_t k0 = uint32_t(key[0]), k1 = uint32_t(key[1]);
  const TensorView& y = call.out[0];
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (y.dtype == DType::f64) y.as<double>()[i] = philox::uniformF64(k0, k1, uint64_t(i));
    else y.as<float>()[i] = philox::uniformF32(k0, k1, uint64_t(i));
  }
}

void random_fold_in(KernelCall& call) {
  const auto* key = call.in[0].as<int32_t>();
  uint32_t k[2] = {uint32_t(key[0]), uint32_t(key[1])}, derived[2];
  philox::foldIn(k, uint32_t(call.in[1].as<int32_t>()[0]), derived);
  call.out[0].as<int32_t>()[0] = int32_t(derived[0]);
  call.out[0].as<int32_t>()[1] = int32_t(derived[1]);
}

}  // namespace spmd::runtime::reference
