// Reference 2-D convolution: NCHW input, OIHW filter, optional bias, stride, zero padding,
// dilation and groups (output f reads the input channels of group f / (O / G)); with relu
// (spmd-fuse-relu's form), max(0, y) of the rounded result.
#include "runtime/base/NanRules.h"
#include "runtime/device/WidenedBf16.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {

void conv2d(KernelCall& call) {
  if (call.in[0].dtype == DType::bf16) return widenedBf16<conv2d>(call);  // f32 between roundings
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &x = call.in[0], &w = call.in[1], &y = call.out[0];
    const T* bias = call.in.size() > 2 ? call.in[2].as<T>() : nullptr;
    const ConvView attrs = convAttrs(call.step);
    const auto &stride = attrs.stride, &pad = attrs.padding;
    const auto& dil = attrs.dilation;
    int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
    int64_t o = w.dim(0), kh = w.dim(2), kw = w.dim(3), oh = y.dim(2), ow = y.dim(3);
    const int64_t cg = c / attrs.groups, og = o / attrs.groups;  // channels and outputs a group
    const T *xp = x.as<T>(), *wp = w.as<T>();
    T* yp = y.as<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t f = 0; f < o; ++f)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            double acc = bias ? bias[f] : 0.0;
            for (int64_t k = 0; k < cg; ++k)
              for (int64_t u = 0; u < kh; ++u)
                for (int64_t v = 0; v < kw; ++v) {
                  int64_t r = i * stride[0] - pad[0] + u * dil[0], s = j * stride[1] - pad[1] + v * dil[1];
                  if (r < 0 || r >= h || s < 0 || s >= wd) continue;
                  acc += double(xp[((b * c + f / og * cg + k) * h + r) * wd + s]) *
                         double(wp[((f * cg + k) * kh + u) * kw + v]);
                }
            const T rounded = static_cast<T>(acc);
            yp[((b * o + f) * oh + i) * ow + j] = attrs.relu ? reluOf(rounded) : rounded;
          }
  });
}

}  // namespace spmd::runtime::reference
