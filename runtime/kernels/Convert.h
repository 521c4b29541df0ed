// convert (element type conversion) for the CUDA backend, the simulator and the CPU backend:
// one functor call per element. Float to i32 rounds toward zero and saturates (NaN -> 0); to
// bf16 rounds to nearest even (runtime/base/BFloat16.h), f64 going through f32 as in PyTorch.
#pragma once

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

template <typename Out, typename In>
SPMD_HOST_DEVICE inline Out convertValue(In v) {
  if constexpr (sizeof(In) == 2) {  // from bf16: exact in f32
    return convertValue<Out>(fromBf16(v));
  } else if constexpr (sizeof(Out) == 2) {  // to bf16
    return toBf16(static_cast<float>(v));
  } else if constexpr (sizeof(Out) == 4 && Out(0.5) == Out(0)) {  // to i32
    if constexpr (In(0.5) == In(0)) return Out(v);        // i32 -> i32
    else {
      if (v != v) return Out(0);
      if (v >= In(2147483647.0)) return Out(2147483647);
      if (v <= In(-2147483648.0)) return Out(-2147483647 - 1);
      return Out(v);
    }
  } else {
    return Out(v);
  }
}

template <typename Out, typename In>
struct ConvertFn {
  const In* x;
  Out* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = convertValue<Out>(x[i]); }
};

template <class Api, typename In>
void convertFrom(KernelCall& call) {
  const In* x = call.in[0].as<In>();
  int64_t n = call.out[0].numel();
  switch (call.out[0].dtype) {
    case DType::f32: return Api::forEach(call, n, ConvertFn<float, In>{x, call.out[0].as<float>()});
    case DType::f64: return Api::forEach(call, n, ConvertFn<double, In>{x, call.out[0].as<double>()});
    case DType::i32: return Api::forEach(call, n, ConvertFn<int32_t, In>{x, call.out[0].as<int32_t>()});
    case DType::bf16: return Api::forEach(call, n, ConvertFn<bf16, In>{x, call.out[0].as<bf16>()});
  }
}

template <class Api>
void convert(KernelCall& call) {
  switch (call.in[0].dtype) {
    case DType::f32: return convertFrom<Api, float>(call);
    case DType::f64: return convertFrom<Api, double>(call);
    case DType::i32: return convertFrom<Api, int32_t>(call);
    case DType::bf16: return convertFrom<Api, bf16>(call);
  }
}

#define SPMD_LIBRARY_CONVERT_OPS(X) X(convert)

}  // namespace spmd::runtime::kernels
