// Reference batch normalization over N and the spatial dims, per channel (dim 1); training
// form (batch statistics, biased variance; with relu, max(0, y)) and inference form (given
// statistics).
#include <cmath>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

// x viewed as [outer = N, channels, inner = H*W].
struct ChannelLayout {
  int64_t outer, channels, inner;
  explicit ChannelLayout(const TensorView& x)
      : outer(x.dim(0)), channels(x.dim(1)), inner(numElements(x.shape.subspan(2))) {}
  int64_t at(int64_t n, int64_t c, int64_t i) const { return (n * channels + c) * inner + i; }
};

template <typename T>
void normalize(const TensorView& x, const TensorView& y, const T* scale, const T* offset,
               const std::vector<double>& mean, const std::vector<double>& var, double eps, bool relu = false) {
  ChannelLayout l(x);
  for (int64_t c = 0; c < l.channels; ++c) {
    double inv = 1.0 / std::sqrt(var[c] + eps);
    for (int64_t n = 0; n < l.outer; ++n)
      for (int64_t i = 0; i < l.inner; ++i) {
        const double v = (double(x.as<T>()[l.at(n, c, i)]) - mean[c]) * inv * scale[c] + offset[c];
        y.as<T>()[l.at(n, c, i)] = relu ? reluOf(static_cast<T>(v)) : static_cast<T>(v);
      }
  }
}

// The optional mask's weight of row n (1 without a mask), and W = the weights' sum times H * W.
template <typename T>
struct RowWeights {
  const T* mask;
  double weight(int64_t n) const { return mask ? double(mask[n]) : 1.0; }
  double count(const ChannelLayout& l) const {
    if (!mask) return double(l.outer * l.inner);
    double total = 0;
    for (int64_t n = 0; n < l.outer; ++n) total += weight(n);
    return total * double(l.inner);
  }
};

template <typename T>
RowWeights<T> rowWeights(const KernelCall& call, size_t maskInput) {
  return {call.in.size() > maskInput ? call.in[maskInput].as<T>() : nullptr};
}

}  // namespace

// inputs: x, scale, offset, mask (optional; rows weighted by it, W = 0 gives mean 0, variance 1)
void batch_norm_train(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& x = call.in[0];
    ChannelLayout l(x);
    const RowWeights<T> w = rowWeights<T>(call, 3);
    const double count = w.count(l);
    std::vector<double> mean(l.channels), var(l.channels);
    for (int64_t c = 0; c < l.channels; ++c) {
      double sum = 0, sq = 0;
      for (int64_t n = 0; n < l.outer; ++n)
        for (int64_t i = 0; i < l.inner; ++i) sum += w.weight(n) * x.as<T>()[l.at(n, c, i)];
      mean[c] = count > 0 ? sum / count : 0.0;
      for (int64_t n = 0; n < l.outer; ++n)
        for (int64_t i = 0; i < l.inner; ++i) {
          double d = x.as<T>()[l.at(n, c, i)] - mean[c];
          sq += w.weight(n) * d * d;
        }
      var[c] = count > 0 ? sq / count : 1.0;
      call.out[1].as<T>()[c] = static_cast<T>(mean[c]);
      call.out[2].as<T>()[c] = static_cast<T>(var[c]);
    }
    normalize<T>(x, call.out[0], call.in[1].as<T>(), call.in[2].as<T>(), mean, var,
                 normEpsilon(call.step), attrsOf<NormReluAttrs>(call.step).relu);
  });
}

void batch_norm_infer(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    int64_t channels = call.in[0].dim(1);
    const T *m = call.in[3].as<T>(), *v = call.in[4].as<T>();
    std::vector<double> mean(m, m + channels), var(v, v + channels);
    normalize<T>(call.in[0], call.out[0], call.in[1].as<T>(), call.in[2].as<T>(), mean, var,
                 normEpsilon(call.step));
  });
}


// inputs: result_grad, input, scale, batch_mean, batch_variance (biased), mask (optional);
// outputs: input_grad, scale_grad, offset_grad. With xhat = (x - mean) * rstd over M values:
// dscale = sum(dy * xhat), doffset = sum(dy), dx = scale * rstd / M * (M dy - doffset - xhat dscale);
// with a mask w (W = sum(w) * H * W): dx_n = scale * rstd * (dy_n - w_n / W (doffset + xhat dscale)).
void batch_norm_train_backward(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &dy = call.in[0], &x = call.in[1];
    const T *scale = call.in[2].as<T>(), *mean = call.in[3].as<T>(), *var = call.in[4].as<T>();
    ChannelLayout l(x);
    const RowWeights<T> w = rowWeights<T>(call, 5);
    const double count = w.count(l), eps = normEpsilon(call.step);
    for (int64_t c = 0; c < l.channels; ++c) {
      double rstd = 1.0 / std::sqrt(double(var[c]) + eps), dscale = 0, doffset = 0;
      auto xhat = [&](int64_t at) { return (double(x.as<T>()[at]) - double(mean[c])) * rstd; };
      for (int64_t n = 0; n < l.outer; ++n)
        for (int64_t i = 0; i < l.inner; ++i) {
          int64_t at = l.at(n, c, i);
          dscale += double(dy.as<T>()[at]) * xhat(at);
          doffset += double(dy.as<T>()[at]);
        }
      double k = double(scale[c]) * rstd / count;
      for (int64_t n = 0; n < l.outer; ++n)
        for (int64_t i = 0; i < l.inner; ++i) {
          int64_t at = l.at(n, c, i);
          call.out[0].as<T>()[at] = static_cast<T>(
              !w.mask ? k * (count * double(dy.as<T>()[at]) - doffset - xhat(at) * dscale)
              : count > 0 ? double(scale[c]) * rstd * (double(dy.as<T>()[at]) - w.weight(n) / count * (doffset + xhat(at) * dscale))
                          : double(scale[c]) * rstd * double(dy.as<T>()[at]));
        }
      call.out[1].as<T>()[c] = static_cast<T>(dscale);
      call.out[2].as<T>()[c] = static_cast<T>(doffset);
    }
  });
}

}  // namespace spmd::runtime::reference
