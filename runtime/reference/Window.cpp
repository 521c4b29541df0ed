// Reference reduce_window (max, sum, mean with stride, padding and dilation) and its input
// gradient: loops over every output window; the backward scatters each window's cotangent into
// a double accumulator (the library's kernel gathers instead, so the two are independent).
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

struct Windows {
  int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  Reduction kind;
  bool countPad;

  // f(output index, input index) for every real (unpadded) element of every window, in
  // row-major window order.
  template <typename F>
  void forEach(F f) const {
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox)
          for (int64_t ky = 0; ky < kh; ++ky)
            for (int64_t kx = 0; kx < kw; ++kx) {
              int64_t y = oy * sh - ph + ky * dh, x = ox * sw - pw + kx * dw;
              if (y >= 0 && y < h && x >= 0 && x < w)
                f(p * oh * ow + oy * ow + ox, p * h * w + y * w + x);
            }
  }
  // What each window's sum is divided by: 1 (sum), the window size, or its real elements (mean).
  std::vector<double> divisors(int64_t outputs) const {
    std::vector<double> d(outputs, kind == Reduction::Mean && countPad ? double(kh * kw) : 1.0);
    if (kind == Reduction::Mean && !countPad) {
      std::fill(d.begin(), d.end(), 0.0);
      forEach([&](int64_t o, int64_t) { d[o] += 1.0; });
    }
    return d;
  }
};

Windows windows(const KernelCall& call, const TensorView& input, const TensorView& output) {
  const WindowAttrs& attrs = attrsOf<WindowAttrs>(call.step);
  const auto &k = attrs.window, &s = attrs.stride, &pad = attrs.padding, &d = attrs.dilation;
  return {input.dim(0) * input.dim(1), input.dim(2), input.dim(3), output.dim(2), output.dim(3),
          k[0], k[1], s[0], s[1], pad[0], pad[1], d[0], d[1],
          attrs.reduction, attrs.count_include_pad};
}

// For each output element, the input index its max window selects (first max, first NaN).
template <typename T>
std::vector<int64_t> maxSources(const Windows& g, const T* x, int64_t outputs) {
  std::vector<int64_t> best(outputs, -1);
  g.forEach([&](int64_t o, int64_t i) {
    if (best[o] < 0 || argmaxTakes(x[i], x[best[o]])) best[o] = i;
  });
  return best;
}

}  // namespace

void reduce_window(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &x = call.in[0], &y = call.out[0];
    Windows g = windows(call, x, y);
    if (g.kind == Reduction::Max) {
      std::vector<int64_t> best = maxSources(g, x.as<T>(), y.numel());
      for (int64_t o = 0; o < y.numel(); ++o) y.as<T>()[o] = x.as<T>()[best[o]];
      return;
    }
    std::vector<double> sum(y.numel(), 0.0), divisor = g.divisors(y.numel());
    g.forEach([&](int64_t o, int64_t i) { sum[o] += double(x.as<T>()[i]); });
    for (int64_t o = 0; o < y.numel(); ++o) y.as<T>()[o] = static_cast<T>(sum[o] / divisor[o]);
  });
}

void reduce_window_backward(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &dy = call.in[0], &dx = call.out[0];
    Windows g = windows(call, dx, dy);
    std::vector<double> acc(dx.numel(), 0.0);
    if (g.kind == Reduction::Max) {
      std::vector<int64_t> best = maxSources(g, call.in[1].as<T>(), dy.numel());
      for (int64_t o = 0; o < dy.numel(); ++o) acc[best[o]] += double(dy.as<T>()[o]);
    } else {
      std::vector<double> divisor = g.divisors(dy.numel());
      g.forEach([&](int64_t o, int64_t i) { acc[i] += double(dy.as<T>()[o]) / divisor[o]; });
    }
    for (int64_t i = 0; i < dx.numel(); ++i) dx.as<T>()[i] = static_cast<T>(acc[i]);
  });
}

}  // namespace spmd::runtime::reference
