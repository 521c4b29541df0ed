// Reference conv2d gradients: w.r.t. the input (backward data) and the filter (backward
// filter), the plain loops of the forward convolution run as scatters, in double.
#include <vector>

#include "runtime/device/WidenedBf16.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

// Calls fn(xIndex, wIndex, yIndex) for every (input, filter, output) triple the forward
// convolution multiplies together; x, w and y are NCHW / OIHW / NCHW shapes (w [O, C / G, KH, KW]).
template <typename Fn>
void forEachTap(const TensorView& x, const TensorView& w, const TensorView& y, const Step& step,
                Fn fn) {
  const ConvView attrs = convAttrs(step);
  const auto &stride = attrs.stride, &pad = attrs.padding;
  const auto& dil = attrs.dilation;
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  int64_t o = w.dim(0), kh = w.dim(2), kw = w.dim(3), oh = y.dim(2), ow = y.dim(3);
  const int64_t cg = c / attrs.groups, og = o / attrs.groups;  // channels and outputs a group
  for (int64_t b = 0; b < n; ++b)
    for (int64_t f = 0; f < o; ++f)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          for (int64_t k = 0; k < cg; ++k)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                int64_t r = i * stride[0] - pad[0] + u * dil[0], s = j * stride[1] - pad[1] + v * dil[1];
                if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                fn(((b * c + f / og * cg + k) * h + r) * wd + s, ((f * cg + k) * kh + u) * kw + v,
                   ((b * o + f) * oh + i) * ow + j);
              }
}

template <typename T>
void store(const TensorView& out, const std::vector<double>& acc) {
  for (size_t i = 0; i < acc.size(); ++i) out.as<T>()[i] = static_cast<T>(acc[i]);
}

}  // namespace

// inputs: result_grad [N, O, OH, OW], filter [O, C, KH, KW]; output: input_grad [N, C, H, W]
void conv2d_backward_data(KernelCall& call) {
  if (call.in[0].dtype == DType::bf16) return widenedBf16<conv2d_backward_data>(call);  // f32 between roundings
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &dy = call.in[0], &w = call.in[1], &dx = call.out[0];
    std::vector<double> acc(dx.numel(), 0.0);
    forEachTap(dx, w, dy, call.step, [&](int64_t xi, int64_t wi, int64_t yi) {
      acc[xi] += double(dy.as<T>()[yi]) * double(w.as<T>()[wi]);
    });
    store<T>(dx, acc);
  });
}

// inputs: input [N, C, H, W], result_grad [N, O, OH, OW]; output: filter_grad [O, C, KH, KW]
void conv2d_backward_filter(KernelCall& call) {
  if (call.in[0].dtype == DType::bf16) return widenedBf16<conv2d_backward_filter>(call);  // f32 between roundings
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &x = call.in[0], &dy = call.in[1], &dw = call.out[0];
    std::vector<double> acc(dw.numel(), 0.0);
    forEachTap(x, dw, dy, call.step, [&](int64_t xi, int64_t wi, int64_t yi) {
      acc[wi] += double(dy.as<T>()[yi]) * double(x.as<T>()[xi]);
    });
    store<T>(dw, acc);
  });
}

}  // namespace spmd::runtime::reference
