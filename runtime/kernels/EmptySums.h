// Convolutions and matmuls over nothing on the GPU-like backends: the cuda backend's calls of
// cuDNN and cuBLAS (which refuse a tensor with a zero extent: a descriptor of N = 0, a leading
// dimension of 0) and sim, which runs this code in their place. A call whose outputs hold no
// element does nothing; one whose sums run over an empty extent (a filter gradient of a batch of
// 0, a matmul with K = 0, a convolution of 0 input channels) writes the empty sum: zeros, plus
// the bias where the op adds one, through a convolution's fused relu. The CPU backend's own is
// runtime/cpu/EmptySums.cpp (its blocked layouts).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "runtime/base/BFloat16.h"
#include "runtime/kernels/Common.h"
#include "runtime/kernels/Dense.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

template <typename T>
struct ZeroFn {
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = T(0); }
};
template <>
struct ZeroFn<bf16> {
  bf16* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = toBf16(0.0f); }
};

// Whether conv2d, its backward ops or matmul has nothing to compute: every output empty, or an
// operand (not the bias, a third input) empty, so that each sum runs over nothing.
inline bool sumsOverNothing(const KernelCall& call) {
  const auto holdsNothing = [](const TensorView& t) { return t.numel() == 0; };
  const auto operandsEnd = call.in.begin() + std::min<std::ptrdiff_t>(std::ptrdiff_t(call.in.size()), 2);
  return std::all_of(call.out.begin(), call.out.end(), holdsNothing) ||
         std::any_of(call.in.begin(), operandsEnd, holdsNothing);
}

// Output k of a call over nothing: conv2d's and matmul's result with a bias is that bias (through
// a convolution's fused relu), anything else zeros.
template <class Api, typename T>
void writeEmptySum(KernelCall& call, size_t k) {
  const TensorView& y = call.out[k];
  const bool conv = call.step.op == "conv2d";
  if constexpr (!std::is_same_v<T, int32_t>) {
    if (k == 0 && call.in.size() > 2 && (conv || call.step.op == "matmul")) {
      const TensorView& bias = call.in[2];
      if (conv)  // plain NCHW or channels-last ("nhwc"): the layouts these backends' convolutions take
        Api::forEach(call, y.numel(), ChannelBiasFn<T>{bias.as<T>(), y.as<T>(), y.dim(1),
                                                       y.layout == kChannelsLast ? 1 : y.dim(2) * y.dim(3)});
      else
        Api::forEach(call, y.numel(), RowBiasFn<T>{bias.as<T>(), y.as<T>(), y.dim(y.rank() - 1)});
      if (conv && convAttrs(call.step).relu) Api::forEach(call, y.numel(), ReluInPlaceFn<T>{y.as<T>()});
      return;
    }
  }
  Api::forEach(call, y.numel(), ZeroFn<T>{y.as<T>()});
}

// True where `call` was one over nothing, its outputs written (on the call's stream).
template <class Api>
bool emptySums(KernelCall& call) {
  if (!sumsOverNothing(call)) return false;
  for (size_t k = 0; k < call.out.size(); ++k) {
    if (call.out[k].numel() == 0) continue;
    switch (call.out[k].dtype) {
      case DType::f32: writeEmptySum<Api, float>(call, k); break;
      case DType::f64: writeEmptySum<Api, double>(call, k); break;
      case DType::bf16: writeEmptySum<Api, bf16>(call, k); break;
      case DType::i32: writeEmptySum<Api, int32_t>(call, k); break;
    }
  }
  return true;
}

}  // namespace spmd::runtime::kernels
