// Batch normalization (training, inference, backward) over N and the spatial dims per channel,
// for the CUDA backend and the simulator: per-channel sums in double as two-stage reductions
// (runtime/kernels/Slices.h: blocks over (channel, slice), then a fold per channel; the
// statistics in one pass, as shifted sums), then a grid-stride pass applies. Our own kernels rather than cuDNN's
// because the dialect returns the biased batch variance (cuDNN returns the inverse standard
// deviation and updates running statistics itself). The CPU backend has its own (cpu/Norm.cpp).
#pragma once

#include <cmath>
#include <initializer_list>
#include <string>

#include "runtime/base/NanRules.h"
#include "runtime/kernels/Common.h"
#include "runtime/kernels/Divide.h"
#include "runtime/kernels/Launch.h"
#include "runtime/kernels/Slices.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

// x viewed as [outer, C, inner]: [N, C, H*W] plain, [N*H*W, C, 1] channels-last ("nhwc"). Either
// way a channel's k-th element is (n, hw) = (k / (H*W), k % (H*W)), so the sums run in one order
// and give the same bits in both layouts. `rowsPerSample`: rows per mask entry (1 plain, H*W
// channels-last).
struct NormLayout {
  int64_t outer, channels, inner;
  int64_t rowsPerSample = 1;
  // Below 2^32 elements the channel of an index takes no division (runtime/kernels/Divide.h).
  bool narrow = false;
  Divider byInner, byChannels;
  SPMD_HOST_DEVICE int64_t channelOf(int64_t i) const {
    if (!narrow) return (i / inner) % channels;
    const uint32_t row = byInner.quotient(uint32_t(i));
    return int64_t(row - byChannels.quotient(row) * uint32_t(channels));
  }
};

inline NormLayout normLayoutOf(const TensorView& x) {
  const int64_t spatial = numElements(x.shape.subspan(2));  // not numel / (N C): x may hold no element
  NormLayout l{x.dim(0), x.dim(1), spatial, 1, false, {}, {}};
  if (x.layout == kChannelsLast) l = NormLayout{x.dim(0) * spatial, x.dim(1), 1, spatial, false, {}, {}};
  else if (!x.layout.empty())
    throw Error("batch norm on the device reads plain and nhwc tensors, not " + std::string(x.layout));
  if (x.numel() > 0 && x.numel() <= int64_t(UINT32_MAX)) {
    l.narrow = true;
    l.byInner = dividerOf(uint32_t(l.inner));
    l.byChannels = dividerOf(uint32_t(l.channels));
  }
  return l;
}

// A batch norm's data, gradient and result are read and written at one index: one layout.
inline void checkOneLayout(const KernelCall& call, std::initializer_list<TensorView> views) {
  for (const TensorView& v : views)
    if (v.layout != views.begin()->layout)
      throw Error(call.step.op + " (" + call.step.where() + ") on the device needs its data, gradient and result in "
                  "one layout, got " + (views.begin()->layout.empty() ? "plain" : std::string(views.begin()->layout)) +
                  " and " + (v.layout.empty() ? "plain" : std::string(v.layout)));
}

// The weights' total of a channel, W = sum(mask) * H * W (N * H * W without a mask).
template <typename T>
SPMD_HOST_DEVICE double weightTotal(const T* mask, const NormLayout& l) {
  if (!mask) return double(l.outer * l.inner);
  double w = 0;
  for (int64_t n = 0; n < l.outer / l.rowsPerSample; ++n) w += double(mask[n]);
  return w * double(l.inner * l.rowsPerSample);
}

// The statistics in one pass over x, as shifted sums: with K the channel's first element (0 when
// it is not finite) and w the row's mask entry (1 without), S1 = sum w (x - K) and
// S2 = sum w (x - K)^2 in double give mean = K + S1 / W and the biased variance
// (S2 - S1^2 / W) / W. Shifting by a value of the data keeps the subtraction's cancellation to
// about (mean - K)^2 / var ulps of a double, far below an f32 ulp (and below f64 kernel cases'
// 1e-12), where the unshifted sums would lose everything to a large mean; it saves the second
// pass over x and two of the five launches the two-pass form took. NaN and infinities come out
// as the two-pass form gives them (K is finite).
template <typename T>
SPMD_HOST_DEVICE double normShift(const T* x, const NormLayout& l, int64_t c) {
  const double k = double(x[c * l.inner]);
  return k - k == 0 ? k : 0.0;  // finite
}

// Stage 1, a block per (channel, slice): the slice's S1 and S2.
template <typename T>
struct NormSliceFn {
  const T* x;
  NormLayout l;
  Slices sl;
  const T* mask;
  double* partial;  // [channel][slice][2]
  template <class Block>
  SPMD_HOST_DEVICE void operator()(Block& b) const {
    const int64_t c = b.block() / sl.slices, s = b.block() % sl.slices, end = sl.end(s);
    const double k = normShift(x, l, c);
    double s1 = 0, s2 = 0;
    ChannelCursor at(sl.begin(s) + b.thread(), b.blockSize(), l.inner);
    auto add = [&](int64_t row, double v) {
      const double w = mask ? double(mask[row / l.rowsPerSample]) : 1.0, d = v - k;
      s1 += w * d;
      s2 += w * d * d;
    };
    const int64_t step = b.blockSize();
    int64_t e = sl.begin(s) + b.thread();
    for (; e + 3 * step < end; e += 4 * step) {  // four loads in flight, added in the same order
      int64_t rows[4], offsets[4];
      for (int u = 0; u < 4; ++u) rows[u] = at.row, offsets[u] = at.offset(c, l.channels), at.advance();
      const double v0 = double(x[offsets[0]]), v1 = double(x[offsets[1]]), v2 = double(x[offsets[2]]),
                   v3 = double(x[offsets[3]]);
      add(rows[0], v0), add(rows[1], v1), add(rows[2], v2), add(rows[3], v3);
    }
    for (; e < end; e += step, at.advance()) add(at.row, double(x[at.offset(c, l.channels)]));
    const double t1 = blockSum(b, s1), t2 = blockSum(b, s2);
    if (b.thread() == 0) partial[2 * b.block()] = t1, partial[2 * b.block() + 1] = t2;
  }
};

// Stage 2, a thread per channel: the slices' sums in order, then the mean and biased variance
// (and 1 / sqrt(var + eps) for the apply pass); no weight at all gives mean 0, variance 1.
template <typename T>
struct NormFinishFn {
  const T* x;
  const double* partial;
  Slices sl;
  NormLayout l;
  const T* mask;
  T *mean, *var;
  double* stats;  // [mean..., var..., 1 / sqrt(var + eps)...] in double for the apply pass
  double eps;
  SPMD_HOST_DEVICE void operator()(int64_t c) const {
    const double count = weightTotal(mask, l);
    double s1 = 0, s2 = 0;
    for (int64_t s = 0; s < sl.slices; ++s) s1 += partial[2 * (c * sl.slices + s)], s2 += partial[2 * (c * sl.slices + s) + 1];
    double m = 0, v = 1;
    if (count > 0) {
      m = normShift(x, l, c) + s1 / count;
      v = (s2 - s1 * (s1 / count)) / count;
      v = v < 0 ? 0.0 : v;  // rounding below a variance of 0 (NaN stays NaN)
    }
    mean[c] = static_cast<T>(m), var[c] = static_cast<T>(v);
    stats[c] = m, stats[l.channels + c] = v, stats[2 * l.channels + c] = 1.0 / ::sqrt(v + eps);
  }
};

// y = (x - mean) / sqrt(var + eps) * scale + offset, statistics in S (double when computed here);
// with relu, max(0, y) (batch_norm_train's fused form). `invStd`: 1 / sqrt(var + eps) per channel
// where the statistics pass left it (a double square root and division per element cost more
// than the pass's memory traffic), else computed here.
template <typename T, typename S>
struct NormApplyFn {
  const T *x, *scale, *offset;
  const S *mean, *var;
  double eps;
  NormLayout l;
  T* y;
  bool relu = false;
  const double* invStd = nullptr;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t c = l.channelOf(i);
    const double inv = invStd ? invStd[c] : 1.0 / ::sqrt(double(var[c]) + eps);
    const double v = (double(x[i]) - double(mean[c])) * inv * double(scale[c]) + double(offset[c]);
    y[i] = relu ? reluOf(static_cast<T>(v)) : static_cast<T>(v);
  }
};

// Per channel: dscale = sum(dy * xhat), doffset = sum(dy) (over every row, masked or not).
// Stage 1, a block per (channel, slice): the slice's two sums.
template <typename T>
struct NormBackwardSliceFn {
  const T *dy, *x, *mean, *var;
  double eps;
  NormLayout l;
  Slices sl;
  double* partial;  // [channel][slice][2]
  template <class Block>
  SPMD_HOST_DEVICE void operator()(Block& b) const {
    const int64_t c = b.block() / sl.slices, s = b.block() % sl.slices, end = sl.end(s);
    const double m = double(mean[c]), rstd = 1.0 / ::sqrt(double(var[c]) + eps);
    double s1 = 0, s2 = 0;
    ChannelCursor at(sl.begin(s) + b.thread(), b.blockSize(), l.inner);
    auto add = [&](double g, double v) {
      s1 += g * (v - m) * rstd;
      s2 += g;
    };
    const int64_t step = b.blockSize();
    int64_t k = sl.begin(s) + b.thread();
    for (; k + 3 * step < end; k += 4 * step) {  // eight loads in flight, added in the same order
      int64_t i[4];
      for (int u = 0; u < 4; ++u) i[u] = at.offset(c, l.channels), at.advance();
      const double g0 = double(dy[i[0]]), g1 = double(dy[i[1]]), g2 = double(dy[i[2]]), g3 = double(dy[i[3]]);
      const double v0 = double(x[i[0]]), v1 = double(x[i[1]]), v2 = double(x[i[2]]), v3 = double(x[i[3]]);
      add(g0, v0), add(g1, v1), add(g2, v2), add(g3, v3);
    }
    for (; k < end; k += step, at.advance()) {
      const int64_t i = at.offset(c, l.channels);
      add(double(dy[i]), double(x[i]));
    }
    const double ds = blockSum(b, s1), dof = blockSum(b, s2);
    if (b.thread() == 0) partial[2 * b.block()] = ds, partial[2 * b.block() + 1] = dof;
  }
};

// Stage 2, a thread per channel: the slices' sums in order, and the apply pass's per-channel
// factors.
constexpr int64_t kNormSums = 5;
template <typename T>
struct NormBackwardFinishFn {
  const double* partial;
  Slices sl;
  NormLayout l;
  const T* mask;
  T *dscale, *doffset;
  const T *scale, *var;
  double eps;
  // [dscale, doffset, W, rstd = 1 / sqrt(var + eps), scale rstd / (N H W)] per channel in double
  // for the apply pass
  double* sums;
  SPMD_HOST_DEVICE void operator()(int64_t c) const {
    double ds = 0, dof = 0;
    for (int64_t s = 0; s < sl.slices; ++s) ds += partial[2 * (c * sl.slices + s)], dof += partial[2 * (c * sl.slices + s) + 1];
    dscale[c] = static_cast<T>(ds), doffset[c] = static_cast<T>(dof);
    const double rstd = 1.0 / ::sqrt(double(var[c]) + eps);
    sums[kNormSums * c] = ds, sums[kNormSums * c + 1] = dof, sums[kNormSums * c + 2] = weightTotal(mask, l);
    sums[kNormSums * c + 3] = rstd, sums[kNormSums * c + 4] = double(scale[c]) * rstd / double(l.outer * l.inner);
  }
};

// dx = scale * rstd / M * (M dy - doffset - xhat dscale), M = N * H * W; with a mask w,
// dx_n = scale * rstd * (dy_n - w_n / W (doffset + xhat dscale)), W = sum(w) * H * W.
template <typename T>
struct NormBackwardApplyFn {
  const T *dy, *x, *scale, *mean;
  NormLayout l;
  const double* sums;  // NormBackwardFinishFn's
  T* dx;
  const T* mask = nullptr;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t c = l.channelOf(i);
    const double* at = sums + kNormSums * c;
    const double count = double(l.outer * l.inner), rstd = at[3];
    const double xhat = (double(x[i]) - double(mean[c])) * rstd, k = at[4];
    const double ds = at[0], dof = at[1], weights = at[2];
    if (!mask) {
      dx[i] = static_cast<T>(k * (count * double(dy[i]) - dof - xhat * ds));
      return;
    }
    const double share = weights > 0 ? double(mask[i / (l.channels * l.inner * l.rowsPerSample)]) / weights : 0.0;
    dx[i] = static_cast<T>(double(scale[c]) * rstd * (double(dy[i]) - share * (dof + xhat * ds)));
  }
};

template <class Api>
double* normScratch(KernelCall& call, int64_t doubles) {
  return reinterpret_cast<double*>(scratch<Api>(call, size_t(doubles) * sizeof(double)));
}

// The optional mask operand (batch_norm_train's 4th, its backward's 6th), or null.
template <typename T>
const T* rowMask(const KernelCall& call, size_t input) {
  return call.in.size() > input ? call.in[input].as<T>() : nullptr;
}

// inputs: x, scale, offset, mask (optional); outputs: y, batch mean, batch variance (biased);
// attribute relu
template <class Api>
void batch_norm_train(KernelCall& call) {
  checkOneLayout(call, {call.in[0], call.out[0]});
  const NormLayout l = normLayoutOf(call.in[0]);
  const Slices sl = slicesOf(l.outer * l.inner);
  const double eps = normEpsilon(call.step);
  double* stats = normScratch<Api>(call, 3 * l.channels + 2 * l.channels * sl.slices);
  double* partial = stats + 3 * l.channels;
  const Launch slices = sliceLaunch("NormSliceFn", l.channels, sl, call.in[0].numel());
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *x = call.in[0].as<T>(), *mask = rowMask<T>(call, 3);
    Api::forBlocks(call, slices, NormSliceFn<T>{x, l, sl, mask, partial});
    Api::forEach(call, l.channels,
                 NormFinishFn<T>{x, partial, sl, l, mask, call.out[1].as<T>(), call.out[2].as<T>(), stats, eps});
    Api::forEach(call, call.in[0].numel(),
                 NormApplyFn<T, double>{x, call.in[1].as<T>(), call.in[2].as<T>(), stats, stats + l.channels, eps, l,
                                        call.out[0].as<T>(), attrsOf<NormReluAttrs>(call.step).relu,
                                        stats + 2 * l.channels});
  });
}

// inputs: x, scale, offset, mean, variance
template <class Api>
void batch_norm_infer(KernelCall& call) {
  checkOneLayout(call, {call.in[0], call.out[0]});
  const NormLayout l = normLayoutOf(call.in[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.in[0].numel(),
                 NormApplyFn<T, T>{call.in[0].as<T>(), call.in[1].as<T>(), call.in[2].as<T>(), call.in[3].as<T>(),
                                   call.in[4].as<T>(), normEpsilon(call.step), l, call.out[0].as<T>()});
  });
}

// inputs: result_grad, input, scale, batch_mean, batch_variance, mask (optional);
// outputs: dx, dscale, doffset
template <class Api>
void batch_norm_train_backward(KernelCall& call) {
  checkOneLayout(call, {call.in[1], call.in[0], call.out[0]});
  const NormLayout l = normLayoutOf(call.in[1]);
  const Slices sl = slicesOf(l.outer * l.inner);
  const double eps = normEpsilon(call.step);
  double* sums = normScratch<Api>(call, kNormSums * l.channels + 2 * l.channels * sl.slices);
  double* partial = sums + kNormSums * l.channels;
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *dy = call.in[0].as<T>(), *x = call.in[1].as<T>(), *scale = call.in[2].as<T>();
    const T *mean = call.in[3].as<T>(), *var = call.in[4].as<T>(), *mask = rowMask<T>(call, 5);
    Api::forBlocks(call, sliceLaunch("NormBackwardSliceFn", l.channels, sl, call.in[0].numel()),
                   NormBackwardSliceFn<T>{dy, x, mean, var, eps, l, sl, partial});
    Api::forEach(call, l.channels,
                 NormBackwardFinishFn<T>{partial, sl, l, mask, call.out[1].as<T>(), call.out[2].as<T>(), scale, var, eps,
                                         sums});
    Api::forEach(call, call.in[0].numel(), NormBackwardApplyFn<T>{dy, x, scale, mean, l, sums, call.out[0].as<T>(), mask});
  });
}

// The block kernels' ops: only for Apis with forBlocks (the CUDA backend and the simulator).
#define SPMD_LIBRARY_BLOCK_OPS(X) X(batch_norm_train) X(batch_norm_infer) X(batch_norm_train_backward)

}  // namespace spmd::runtime::kernels
