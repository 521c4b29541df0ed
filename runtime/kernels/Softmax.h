// softmax and log_softmax along one axis for the CUDA backend, the simulator and the CPU
// backend: one functor call per slice along the axis (outer x inner slices, elements `inner`
// apart), the slice's maximum subtracted before exp, sums in double. A NaN in a slice makes the
// whole slice NaN; a slice of -inf values is NaN, as in PyTorch.
#pragma once

#include <cmath>

#include "runtime/kernels/Common.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

template <typename T, bool Log>
struct AxisSoftmaxFn {
  const T* x;
  T* y;
  int64_t extent, inner;
  SPMD_HOST_DEVICE void operator()(int64_t slice) const {
    int64_t base = (slice / inner) * extent * inner + slice % inner;
    double top = double(x[base]);
    for (int64_t j = 1; j < extent; ++j) top = nanMax(top, double(x[base + j * inner]));
    double sum = 0;
    for (int64_t j = 0; j < extent; ++j) sum += ::exp(double(x[base + j * inner]) - top);
    double logSum = ::log(sum);
    for (int64_t j = 0; j < extent; ++j) {
      double shifted = double(x[base + j * inner]) - top;
      y[base + j * inner] = static_cast<T>(Log ? shifted - logSum : ::exp(shifted) / sum);
    }
  }
};

template <class Api, bool Log>
void axisSoftmax(KernelCall& call) {
  const TensorView& x = call.in[0];
  if (x.numel() == 0) return;
  int64_t axis = attrsOf<AxisAttrs>(call.step).axis, extent = x.dim(axis);
  int64_t inner = numElements(x.shape.subspan(axis + 1));
  visitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, x.numel() / extent, AxisSoftmaxFn<T, Log>{x.as<T>(), call.out[0].as<T>(), extent, inner});
  });
}

template <class Api>
void softmax(KernelCall& call) { axisSoftmax<Api, false>(call); }
template <class Api>
void log_softmax(KernelCall& call) { axisSoftmax<Api, true>(call); }

#define SPMD_LIBRARY_SOFTMAX_OPS(X) X(softmax) X(log_softmax)

}  // namespace spmd::runtime::kernels
