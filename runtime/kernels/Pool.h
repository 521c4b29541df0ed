// 2-D max and average pooling and their input gradients for the CUDA backend, the simulator and
// the CPU backend (runtime/cpu/Pool.cpp runs the same functors as a host loop): one functor call
// per output element forward, and per input element backward, which gathers from the windows
// that hold it, so no two calls write one element and the result does not depend on the order
// the calls run in. Accumulation in double, as the reference.
#pragma once

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

// The geometry of one pooling step: input [n*c, h, w], output [n*c, oh, ow].
struct PoolShape {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;

  // First output row (or column) whose window holds input row i, and one past the last.
  SPMD_HOST_DEVICE int64_t firstWindow(int64_t i, int64_t pad, int64_t k, int64_t s) const {
    int64_t lo = i + pad - k + 1;  // windows starting at o*s - pad > i - k
    return lo <= 0 ? 0 : (lo + s - 1) / s;
  }
  SPMD_HOST_DEVICE int64_t endWindow(int64_t i, int64_t pad, int64_t s, int64_t outer) const {
    int64_t last = (i + pad) / s + 1;
    return last < outer ? last : outer;
  }
};

// `input` is the pooled tensor [N, C, H, W], `output` the pooled result.
inline PoolShape poolShape(const KernelCall& call, const TensorView& input, const TensorView& output) {
  const auto &window = call.step.ints("window"), &stride = call.step.ints("stride"),
             &padding = call.step.ints("padding");
  return {input.dim(0) * input.dim(1), input.dim(2), input.dim(3), output.dim(2), output.dim(3),
          window[0], window[1], stride[0], stride[1], padding[0], padding[1]};
}

// Flat index within the plane of the element a max window selects: the first largest element
// in row-major window order, or the first NaN (NanRules' argmaxTakes); padding never wins.
template <typename T>
SPMD_HOST_DEVICE inline int64_t maxWindowIndex(const T* plane, const PoolShape& g, int64_t oy, int64_t ox) {
  int64_t best = -1;
  for (int64_t y = oy * g.sh - g.ph, ye = y + g.kh; y < ye; ++y) {
    if (y < 0 || y >= g.h) continue;
    for (int64_t x = ox * g.sw - g.pw, xe = x + g.kw; x < xe; ++x) {
      if (x < 0 || x >= g.w) continue;
      if (best < 0 || argmaxTakes(plane[y * g.w + x], plane[best])) best = y * g.w + x;
    }
  }
  return best;
}

template <typename T>
struct MaxPoolFn {
  const T* x;
  T* out;
  PoolShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, p = i / (g.ow * g.oh);
    const T* plane = x + p * g.h * g.w;
    out[i] = plane[maxWindowIndex(plane, g, oy, ox)];
  }
};

template <typename T>
struct AvgPoolFn {
  const T* x;
  T* out;
  PoolShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, p = i / (g.ow * g.oh);
    const T* plane = x + p * g.h * g.w;
    double sum = 0;
    for (int64_t y = oy * g.sh - g.ph, ye = y + g.kh; y < ye; ++y)
      for (int64_t x = ox * g.sw - g.pw, xe = x + g.kw; x < xe; ++x)
        if (y >= 0 && y < g.h && x >= 0 && x < g.w) sum += double(plane[y * g.w + x]);
    out[i] = static_cast<T>(sum / double(g.kh * g.kw));
  }
};

// dx at input element i: the sum of the cotangents of the windows that selected it.
template <typename T>
struct MaxPoolBackwardFn {
  const T* dy;
  const T* x;
  T* dx;
  PoolShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ix = i % g.w, iy = (i / g.w) % g.h, p = i / (g.w * g.h), at = iy * g.w + ix;
    const T* plane = x + p * g.h * g.w;
    const T* grads = dy + p * g.oh * g.ow;
    double sum = 0;
    for (int64_t oy = g.firstWindow(iy, g.ph, g.kh, g.sh), oye = g.endWindow(iy, g.ph, g.sh, g.oh); oy < oye; ++oy)
      for (int64_t ox = g.firstWindow(ix, g.pw, g.kw, g.sw), oxe = g.endWindow(ix, g.pw, g.sw, g.ow); ox < oxe;
           ++ox)
        if (maxWindowIndex(plane, g, oy, ox) == at) sum += double(grads[oy * g.ow + ox]);
    dx[i] = static_cast<T>(sum);
  }
};

// dx at input element i: the cotangents of the windows that hold it, over the window size.
template <typename T>
struct AvgPoolBackwardFn {
  const T* dy;
  T* dx;
  PoolShape g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t ix = i % g.w, iy = (i / g.w) % g.h, p = i / (g.w * g.h);
    const T* grads = dy + p * g.oh * g.ow;
    double sum = 0;
    for (int64_t oy = g.firstWindow(iy, g.ph, g.kh, g.sh), oye = g.endWindow(iy, g.ph, g.sh, g.oh); oy < oye; ++oy)
      for (int64_t ox = g.firstWindow(ix, g.pw, g.kw, g.sw), oxe = g.endWindow(ix, g.pw, g.sw, g.ow); ox < oxe;
           ++ox)
        sum += double(grads[oy * g.ow + ox]);
    dx[i] = static_cast<T>(sum / double(g.kh * g.kw));
  }
};

template <class Api>
void max_pool2d(KernelCall& call) {
  PoolShape g = poolShape(call, call.in[0], call.out[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), MaxPoolFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), g});
  });
}

template <class Api>
void avg_pool2d(KernelCall& call) {
  PoolShape g = poolShape(call, call.in[0], call.out[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), AvgPoolFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), g});
  });
}

// inputs: result_grad, input; output: input_grad.
template <class Api>
void max_pool2d_backward(KernelCall& call) {
  PoolShape g = poolShape(call, call.in[1], call.in[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(),
                 MaxPoolBackwardFn<T>{call.in[0].as<T>(), call.in[1].as<T>(), call.out[0].as<T>(), g});
  });
}

// inputs: result_grad; output: input_grad.
template <class Api>
void avg_pool2d_backward(KernelCall& call) {
  PoolShape g = poolShape(call, call.out[0], call.in[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), AvgPoolBackwardFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), g});
  });
}

#define SPMD_LIBRARY_POOL_OPS(X) X(max_pool2d) X(avg_pool2d) X(max_pool2d_backward) X(avg_pool2d_backward)

}  // namespace spmd::runtime::kernels
