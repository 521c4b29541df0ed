// Batch normalization (training, inference, backward) over N and the spatial dims per channel,
// for the CUDA backend and the simulator: one block per channel reduces in double (a block-wide
// tree in shared memory), then a grid-stride pass applies. Our own kernels rather than cuDNN's
// because the dialect returns the biased batch variance (cuDNN returns the inverse standard
// deviation and updates running statistics itself). The CPU backend has its own (cpu/Norm.cpp).
#pragma once

#include <cmath>

#include "runtime/base/NanRules.h"
#include "runtime/kernels/Common.h"
#include "runtime/kernels/Launch.h"

namespace spmd::runtime::kernels {

// Threads of a per-channel block: a power of two, since blockSum halves the block each round.
constexpr int kNormThreads = kBlockTreeThreads;

// One block per channel, reducing the channel's `elements` (N * H * W) in a double per thread.
inline Launch normChannelLaunch(const char* kernel, int64_t channels, int64_t elements) {
  return {kernel, channels, kNormThreads, 0, kNormThreads * sizeof(double), elements, true, true};
}

struct NormLayout {
  int64_t outer, channels, inner;  // x viewed as [N, C, H*W]
  // Element k (of N * H*W) of channel c.
  SPMD_HOST_DEVICE int64_t at(int64_t c, int64_t k) const { return ((k / inner) * channels + c) * inner + k % inner; }
  SPMD_HOST_DEVICE int64_t channelOf(int64_t i) const { return (i / inner) % channels; }
};

inline NormLayout normLayoutOf(const TensorView& x) {
  return {x.dim(0), x.dim(1), x.numel() / (x.dim(0) * x.dim(1))};
}

// The weight of element k of a channel (its row's mask entry; 1 without a mask), and the
// weights' total W = sum(mask) * H * W (N * H * W without), summed by the block.
template <typename T, class Block>
SPMD_HOST_DEVICE double rowWeightTotal(Block& b, const T* mask, const NormLayout& l) {
  if (!mask) return double(l.outer * l.inner);
  double w = 0;
  for (int64_t n = b.thread(); n < l.outer; n += b.blockSize()) w += double(mask[n]);
  return blockSum(b, w) * double(l.inner);
}

// Per channel (the block): mean and biased variance, two passes as the reference; with a mask,
// rows weighted by it (no weight at all: mean 0, variance 1).
template <typename T>
struct NormStatsFn {
  const T* x;
  T *mean, *var;
  NormLayout l;
  double* stats;  // [mean..., var...] in double for the apply pass
  const T* mask = nullptr;
  template <class Block>
  SPMD_HOST_DEVICE void operator()(Block& b) const {
    const int64_t c = b.block(), elements = l.outer * l.inner;
    const double count = rowWeightTotal(b, mask, l);
    auto weight = [&](int64_t k) { return mask ? double(mask[k / l.inner]) : 1.0; };
    double sum = 0;
    for (int64_t k = b.thread(); k < elements; k += b.blockSize()) sum += weight(k) * double(x[l.at(c, k)]);
    const double total = blockSum(b, sum), m = count > 0 ? total / count : 0.0;
    double sq = 0;
    for (int64_t k = b.thread(); k < elements; k += b.blockSize()) {
      double d = double(x[l.at(c, k)]) - m;
      sq += weight(k) * d * d;
    }
    const double squares = blockSum(b, sq), v = count > 0 ? squares / count : 1.0;
    if (b.thread() == 0) {
      mean[c] = static_cast<T>(m), var[c] = static_cast<T>(v);
      stats[c] = m, stats[l.channels + c] = v;
    }
  }
};

// y = (x - mean) / sqrt(var + eps) * scale + offset, statistics in S (double when computed here);
// with relu, max(0, y) (batch_norm_train's fused form).
template <typename T, typename S>
struct NormApplyFn {
  const T *x, *scale, *offset;
  const S *mean, *var;
  double eps;
  NormLayout l;
  T* y;
  bool relu = false;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t c = l.channelOf(i);
    const double inv = 1.0 / ::sqrt(double(var[c]) + eps);
    const double v = (double(x[i]) - double(mean[c])) * inv * double(scale[c]) + double(offset[c]);
    y[i] = relu ? reluOf(static_cast<T>(v)) : static_cast<T>(v);
  }
};

// Per channel: dscale = sum(dy * xhat), doffset = sum(dy) (over every row, masked or not).
template <typename T>
struct NormBackwardSumsFn {
  const T *dy, *x, *mean, *var;
  double eps;
  NormLayout l;
  T *dscale, *doffset;
  double* sums;  // [dscale, doffset, W] per channel in double for the apply pass
  const T* mask = nullptr;
  template <class Block>
  SPMD_HOST_DEVICE void operator()(Block& b) const {
    const int64_t c = b.block(), count = l.outer * l.inner;
    const double weights = rowWeightTotal(b, mask, l);
    const double rstd = 1.0 / ::sqrt(double(var[c]) + eps);
    double s1 = 0, s2 = 0;
    for (int64_t k = b.thread(); k < count; k += b.blockSize()) {
      const int64_t i = l.at(c, k);
      s1 += double(dy[i]) * (double(x[i]) - double(mean[c])) * rstd;
      s2 += double(dy[i]);
    }
    const double ds = blockSum(b, s1), dof = blockSum(b, s2);
    if (b.thread() == 0) {
      dscale[c] = static_cast<T>(ds), doffset[c] = static_cast<T>(dof);
      sums[3 * c] = ds, sums[3 * c + 1] = dof, sums[3 * c + 2] = weights;
    }
  }
};

// dx = scale * rstd / M * (M dy - doffset - xhat dscale), M = N * H * W; with a mask w,
// dx_n = scale * rstd * (dy_n - w_n / W (doffset + xhat dscale)), W = sum(w) * H * W.
template <typename T>
struct NormBackwardApplyFn {
  const T *dy, *x, *scale, *mean, *var;
  double eps;
  NormLayout l;
  const double* sums;
  T* dx;
  const T* mask = nullptr;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t c = l.channelOf(i);
    const double count = double(l.outer * l.inner), rstd = 1.0 / ::sqrt(double(var[c]) + eps);
    const double xhat = (double(x[i]) - double(mean[c])) * rstd, k = double(scale[c]) * rstd / count;
    const double ds = sums[3 * c], dof = sums[3 * c + 1], weights = sums[3 * c + 2];
    if (!mask) {
      dx[i] = static_cast<T>(k * (count * double(dy[i]) - dof - xhat * ds));
      return;
    }
    const double share = weights > 0 ? double(mask[i / (l.channels * l.inner)]) / weights : 0.0;
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
  const NormLayout l = normLayoutOf(call.in[0]);
  const double eps = call.step.real("epsilon");
  double* stats = normScratch<Api>(call, 2 * l.channels);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = call.in[0].as<T>();
    Api::forBlocks(call, normChannelLaunch("NormStatsFn", l.channels, l.outer * l.inner),
                   NormStatsFn<T>{x, call.out[1].as<T>(), call.out[2].as<T>(), l, stats, rowMask<T>(call, 3)});
    Api::forEach(call, call.in[0].numel(),
                 NormApplyFn<T, double>{x, call.in[1].as<T>(), call.in[2].as<T>(), stats, stats + l.channels, eps, l,
                                        call.out[0].as<T>(), call.step.flag("relu")});
  });
}

// inputs: x, scale, offset, mean, variance
template <class Api>
void batch_norm_infer(KernelCall& call) {
  const NormLayout l = normLayoutOf(call.in[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.in[0].numel(),
                 NormApplyFn<T, T>{call.in[0].as<T>(), call.in[1].as<T>(), call.in[2].as<T>(), call.in[3].as<T>(),
                                   call.in[4].as<T>(), call.step.real("epsilon"), l, call.out[0].as<T>()});
  });
}

// inputs: result_grad, input, scale, batch_mean, batch_variance, mask (optional);
// outputs: dx, dscale, doffset
template <class Api>
void batch_norm_train_backward(KernelCall& call) {
  const NormLayout l = normLayoutOf(call.in[1]);
  const double eps = call.step.real("epsilon");
  double* sums = normScratch<Api>(call, 3 * l.channels);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *dy = call.in[0].as<T>(), *x = call.in[1].as<T>(), *scale = call.in[2].as<T>();
    const T *mean = call.in[3].as<T>(), *var = call.in[4].as<T>();
    Api::forBlocks(call, normChannelLaunch("NormBackwardSumsFn", l.channels, l.outer * l.inner),
                   NormBackwardSumsFn<T>{dy, x, mean, var, eps, l, call.out[1].as<T>(), call.out[2].as<T>(), sums,
                                         rowMask<T>(call, 5)});
    Api::forEach(call, call.in[0].numel(),
                 NormBackwardApplyFn<T>{dy, x, scale, mean, var, eps, l, sums, call.out[0].as<T>(), rowMask<T>(call, 5)});
  });
}

// The block kernels' ops: only for Apis with forBlocks (the CUDA backend and the simulator).
#define SPMD_LIBRARY_BLOCK_OPS(X) X(batch_norm_train) X(batch_norm_infer) X(batch_norm_train_backward)

}  // namespace spmd::runtime::kernels
