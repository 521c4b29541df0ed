// reduce_window (every pooling op: max, sum and mean over the windows of an NCHW input, with
// stride, padding and dilation) and its input gradient, for every backend: one functor call per
// output element forward, and per input element backward, which gathers from the windows that
// hold it, so no two calls write one element and the result does not depend on the order the
// calls run in. Accumulation in double, as the reference.
#pragma once

#include "runtime/kernels/Common.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

// The geometry of one window reduction: input [n*c, h, w], output [n*c, oh, ow]; window tap
// (ky, kx) of output (oy, ox) reads input (oy*sh - ph + ky*dh, ox*sw - pw + kx*dw).
struct WindowShape {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  bool mean, countPad;  // mean: divide by the window size (countPad) or by its input elements

  // The output index along one dim whose tap k reads input index i, or -1 for none.
  SPMD_HOST_DEVICE static int64_t windowOf(int64_t i, int64_t k, int64_t s, int64_t p, int64_t d, int64_t outer) {
    int64_t start = i + p - k * d;  // o * s must equal this
    if (start < 0 || start % s != 0 || start / s >= outer) return -1;
    return start / s;
  }
  // What a window's sum is divided by: 1 for sum, the window size or its input elements for mean.
  SPMD_HOST_DEVICE double divisor(int64_t oy, int64_t ox) const {
    if (!mean) return 1.0;
    if (countPad) return double(kh * kw);
    return double(realTaps(oy * sh - ph, kh, dh, h) * realTaps(ox * sw - pw, kw, dw, w));
  }
  SPMD_HOST_DEVICE static int64_t realTaps(int64_t first, int64_t k, int64_t d, int64_t size) {
    int64_t n = 0;
    for (int64_t t = 0; t < k; ++t) n += first + t * d >= 0 && first + t * d < size;
    return n;
  }
};

// `input` is the reduced tensor [N, C, H, W], `output` the result.
inline WindowShape windowShape(const KernelCall& call, const TensorView& input, const TensorView& output) {
  const WindowAttrs& a = attrsOf<WindowAttrs>(call.step);
  return {input.dim(0) * input.dim(1), input.dim(2), input.dim(3), output.dim(2), output.dim(3),
          a.window[0], a.window[1], a.stride[0], a.stride[1], a.padding[0], a.padding[1], a.dilation[0],
          a.dilation[1], a.reduction == Reduction::Mean, a.count_include_pad};
}

// Flat index within the plane of the element a max window selects: the first largest element
// in row-major window order, or the first NaN (NanRules' argmaxTakes); padding never wins.
template <typename T>
SPMD_HOST_DEVICE inline int64_t maxWindowIndex(const T* plane, const WindowShape& g, int64_t oy, int64_t ox) {
  int64_t best = -1;
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    int64_t y = oy * g.sh - g.ph + ky * g.dh;
    if (y < 0 || y >= g.h) continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      int64_t x = ox * g.sw - g.pw + kx * g.dw;
      if (x < 0 || x >= g.w) continue;
      if (best < 0 || argmaxTakes(plane[y * g.w + x], plane[best])) best = y * g.w + x;
    }
  }
  return best;
}

template <typename T>
struct WindowMaxFn {
  const T* x;
  T* out;
  WindowShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, p = i / (g.ow * g.oh);
    const T* plane = x + p * g.h * g.w;
    out[i] = plane[maxWindowIndex(plane, g, oy, ox)];
  }
};

// sum and mean.
template <typename T>
struct WindowSumFn {
  const T* x;
  T* out;
  WindowShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, p = i / (g.ow * g.oh);
    const T* plane = x + p * g.h * g.w;
    double sum = 0;
    for (int64_t ky = 0; ky < g.kh; ++ky)
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        int64_t y = oy * g.sh - g.ph + ky * g.dh, x = ox * g.sw - g.pw + kx * g.dw;
        if (y >= 0 && y < g.h && x >= 0 && x < g.w) sum += double(plane[y * g.w + x]);
      }
    out[i] = static_cast<T>(g.mean ? sum / g.divisor(oy, ox) : sum);
  }
};

// dx at input element i: the cotangents of the windows that hold it (over their divisors), or,
// for max (x given), of those that selected it; summed over the windows in row-major order
// (taps in reverse: a later tap is an earlier window).
template <typename T>
struct WindowBackwardFn {
  const T* dy;
  const T* x;  // the forward's input for max, else null
  T* dx;
  WindowShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ix = i % g.w, iy = (i / g.w) % g.h, p = i / (g.w * g.h), at = iy * g.w + ix;
    const T* plane = x ? x + p * g.h * g.w : nullptr;
    const T* grads = dy + p * g.oh * g.ow;
    double sum = 0;
    for (int64_t ky = g.kh - 1; ky >= 0; --ky) {
      int64_t oy = WindowShape::windowOf(iy, ky, g.sh, g.ph, g.dh, g.oh);
      if (oy < 0) continue;
      for (int64_t kx = g.kw - 1; kx >= 0; --kx) {
        int64_t ox = WindowShape::windowOf(ix, kx, g.sw, g.pw, g.dw, g.ow);
        if (ox < 0) continue;
        if (plane) {
          if (maxWindowIndex(plane, g, oy, ox) == at) sum += double(grads[oy * g.ow + ox]);
        } else if (!g.mean || g.countPad) {
          sum += double(grads[oy * g.ow + ox]);
        } else {
          sum += double(grads[oy * g.ow + ox]) / g.divisor(oy, ox);
        }
      }
    }
    dx[i] = static_cast<T>(g.mean && g.countPad ? sum / double(g.kh * g.kw) : sum);
  }
};

template <class Api>
void reduce_window(KernelCall& call) {
  WindowShape g = windowShape(call, call.in[0], call.out[0]);
  const bool max = attrsOf<WindowAttrs>(call.step).reduction == Reduction::Max;
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (max)
      Api::forEach(call, call.out[0].numel(), WindowMaxFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), g});
    else
      Api::forEach(call, call.out[0].numel(), WindowSumFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), g});
  });
}

// inputs: result_grad, and for max the forward's input; output: input_grad.
template <class Api>
void reduce_window_backward(KernelCall& call) {
  WindowShape g = windowShape(call, call.out[0], call.in[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = call.in.size() > 1 ? call.in[1].as<T>() : nullptr;
    Api::forEach(call, call.out[0].numel(), WindowBackwardFn<T>{call.in[0].as<T>(), x, call.out[0].as<T>(), g});
  });
}

#define SPMD_LIBRARY_WINDOW_OPS(X) X(reduce_window) X(reduce_window_backward)

}  // namespace spmd::runtime::kernels
