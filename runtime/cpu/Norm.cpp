// CPU batch norm: in training, our statistics (double sums per channel) and our normalization
// where the input is blocked or masked (or thread-invariant kernels are asked for), oneDNN's
// training form (batch statistics out) on a plain input; in inference (given statistics), our
// normalization on a blocked input, oneDNN's on a plain one; the backward is our own (double sums
// per channel, below); f64 runs the reference loops. oneDNN normalizes in the layout of the data
// input (plain NCHW, or the blocked layout spmd-assign-layouts gave it); a gradient or result
// buffer in another layout is reordered around the call.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/device/Variants.h"
#include "runtime/program/Layouts.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

// A prepared primitive plus reorders for the data-shaped buffers not in the data input's layout.
struct NormState {
  Prepared p;
  std::unordered_map<int, Relayout> relaid;  // by DNNL_ARG_*

  // Binds `arg` to `view`'s buffer, through a reorder when its layout is not `data`'s.
  void bindData(int arg, const TensorView& view, const dnnl::memory::desc& data, bool isOutput) {
    p.bind(arg, data);
    if (layoutDesc(view) == data) return;
    auto [it, _] = relaid.emplace(arg, Relayout(layoutDesc(view), data, isOutput));
    p.args[arg] = it->second.internal;
  }

  void run(std::initializer_list<std::pair<int, void*>> pointers) {
    std::vector<std::pair<int, void*>> direct;
    for (auto [arg, pointer] : pointers)
      if (auto it = relaid.find(arg); it == relaid.end()) direct.emplace_back(arg, pointer);
      else if (arg != DNNL_ARG_DST && arg != DNNL_ARG_DIFF_SRC) it->second.run(p.stream, pointer, false);
    for (auto [arg, pointer] : direct) p.args.at(arg).set_data_handle(pointer);
    p.primitive.execute(p.stream, p.args);
    for (auto [arg, pointer] : pointers)
      if (auto it = relaid.find(arg); it != relaid.end() && (arg == DNNL_ARG_DST || arg == DNNL_ARG_DIFF_SRC))
        it->second.run(p.stream, pointer, true);
    p.stream.wait();
  }
};


// The optional mask of batch_norm_train (input 3) and its backward (input 5): row n weighs
// mask[n] in the statistics; `count` is W = sum(mask) * H * W (N * H * W without a mask).
struct RowMask {
  const float* mask = nullptr;
  double count = 0;
  double weight(int64_t n) const { return mask ? double(mask[n]) : 1.0; }
};

RowMask rowMask(const KernelCall& call, size_t input, const TensorView& x) {
  int64_t HW = 1;
  for (size_t d = 2; d < x.shape.size(); ++d) HW *= x.shape[d];
  RowMask m{call.in.size() > input ? call.in[input].as<float>() : nullptr, double(x.dim(0) * HW)};
  if (m.mask) {
    double total = 0;
    for (int64_t n = 0; n < x.dim(0); ++n) total += m.mask[n];
    m.count = total * double(HW);
  }
  return m;
}

// Per-channel mean and biased variance of an nChw<B>c tensor, two passes accumulating in double
// (rows weighted by the mask; no weight at all: mean 0, variance 1). oneDNN's blocked batch norm sums in
// f32 lanes, which loses digits on activations whose mean is far from zero (8x the plain
// kernel's error, enough to move ResNet-18's f32 gradients off PyTorch's by 0.4%); these
// statistics then feed oneDNN's normalization as given statistics.
template <int G>
SPMD_ISA_BODY
void statisticsGroup(const float* data, int64_t N, int64_t blocks, int64_t HW, int64_t cb, const RowMask& rows,
                     float* mean, float* variance) {
  const double count = rows.count;
  double sum[G] = {}, square[G] = {};
  for (int64_t n = 0; n < N; ++n) {
    const float* plane = data + (n * blocks + cb) * HW * G;
    const double w = rows.weight(n);
    for (int64_t i = 0; i < HW; ++i)
      for (int l = 0; l < G; ++l) sum[l] += w * plane[i * G + l];
  }
  for (int l = 0; l < G; ++l) sum[l] = count > 0 ? sum[l] / count : 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const float* plane = data + (n * blocks + cb) * HW * G;
    const double w = rows.weight(n);
    for (int64_t i = 0; i < HW; ++i)
      for (int l = 0; l < G; ++l) {
        double d = plane[i * G + l] - sum[l];
        square[l] += w * d * d;
      }
  }
  for (int l = 0; l < G; ++l) {
    mean[cb * G + l] = static_cast<float>(sum[l]);
    variance[cb * G + l] = static_cast<float>(count > 0 ? square[l] / count : 1.0);
  }
}

void blockedStatistics(const TensorView& x, int64_t block, const RowMask& rows, float* mean, float* variance) {
  const int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3), blocks = C / block;
  const float* data = x.as<float>();
#pragma omp parallel for
  for (int64_t cb = 0; cb < blocks; ++cb) {
    if (block == 16) onOwnIsa<statisticsGroup<16>>(data, N, blocks, HW, cb, rows, mean, variance);
    else onOwnIsa<statisticsGroup<8>>(data, N, blocks, HW, cb, rows, mean, variance);
  }
}

// The same for a plain [N, C, ...] tensor (with a mask, which oneDNN's own statistics cannot take, or
// for thread-invariant bits).
void plainStatistics(const TensorView& x, const RowMask& rows, float* mean, float* variance) {
  const int64_t N = x.dim(0), C = x.dim(1), HW = numElements(x.shape.subspan(2));
  const float* data = x.as<float>();
#pragma omp parallel for
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, square = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) sum += rows.weight(n) * data[(n * C + c) * HW + i];
    const double m = rows.count > 0 ? sum / rows.count : 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < HW; ++i) {
        const double d = data[(n * C + c) * HW + i] - m;
        square += rows.weight(n) * d * d;
      }
    mean[c] = static_cast<float>(m);
    variance[c] = static_cast<float>(rows.count > 0 ? square / rows.count : 1.0);
  }
}

// Whether batch_norm_train's statistics are ours (blocked input, a mask, or thread-invariant
// kernels asked for: oneDNN's plain statistics split their sums by thread) and go to oneDNN as
// given ones.
bool ownStatistics(const KernelCall& call) {
  return channelBlock(call.in[0].layout) || call.in.size() > 3 || threadInvariantKernels();
}

// Whether oneDNN applies batch_norm_train's relu in its normalization pass: on a blocked input,
// whose statistics are ours, as an inference with given statistics (fuse_norm_relu needs no
// workspace there); a plain input gets the relu in a pass of its own after oneDNN's.
bool onednnRelu(const KernelCall& call) { return attrsOf<NormReluAttrs>(call.step).relu && channelBlock(call.in[0].layout); }

NormState prepareBatchNorm(KernelCall& call, bool training) {
  using namespace dnnl;
  auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  // Training with our statistics (ownStatistics): oneDNN only normalizes.
  const bool own = training && ownStatistics(call);
  if (!training || own) flags = flags | normalization_flags::use_global_stats;
  const bool relu = training && onednnRelu(call);
  if (relu) flags = flags | normalization_flags::fuse_norm_relu;
  auto data = layoutDesc(call.in[0]);
  batch_normalization_forward::desc desc(
      training && !relu ? prop_kind::forward_training : prop_kind::forward_inference, data,
      static_cast<float>(normEpsilon(call.step)), flags);
  NormState s{{batch_normalization_forward(batch_normalization_forward::primitive_desc(desc, engine())),
               stream(engine()), {}}, {}};
  s.p.bind(DNNL_ARG_SRC, data);
  s.bindData(DNNL_ARG_DST, call.out[0], data, true);
  for (int arg : {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE})
    s.p.bind(arg, call.in[1]);
  return s;
}

void reluAfterNorm(KernelCall& call);  // below

// How the own normalization (below) applies batch_norm_train's relu: none; oneDNN's fused one
// (the larger of the value and 0: NaN and -0 give +0), which reluAfterNorm then mends; or the
// relu op's (reluOf: NaN stays NaN).
enum class NormRelu { none, onednn, op };

// y = (x - mean) * s + shift over HW pixels of G channels side by side (nChw<G>c; G = 1: a plain
// channel), s = scale / sqrt(variance + epsilon) given per channel, as one fused multiply-add.
template <int G, NormRelu Relu>
SPMD_ISA_BODY void normalizeLanes(const float* x, float* y, int64_t HW, const float* mean,
                                  const float* s, const float* shift) {
  for (int64_t i = 0; i < HW; ++i)
    for (int l = 0; l < G; ++l) {
      const float v = std::fma(x[i * G + l] - mean[l], s[l], shift[l]);
      if constexpr (Relu == NormRelu::onednn) y[i * G + l] = v > 0.f ? v : 0.f;
      else if constexpr (Relu == NormRelu::op) y[i * G + l] = reluOf(v);
      else y[i * G + l] = v;
    }
}

template <int G, NormRelu Relu>
void normalizeAll(const float* x, float* y, int64_t groups, int64_t blocks, int64_t HW, const float* mean,
                  const float* s, const float* shift) {
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < groups; ++k) {  // (image, channel group) pairs
    const int64_t c = (k % blocks) * G;
    onOwnIsa<normalizeLanes<G, Relu>>(x + k * HW * G, y + k * HW * G, HW, mean + c, s + c, shift + c);
  }
}

// A batch norm's normalization in our own pass, where its input and output share a layout: for
// batch_norm_train with our statistics (already in its outputs, `trained`) and batch_norm_infer
// (given statistics) on a blocked input, in place of oneDNN's: oneDNN 2.6 stores an f32
// normalization's output with streaming stores (whenever it is aligned), which leave it in no
// cache, so the convolution that reads it next waited on memory. The arithmetic is oneDNN's JIT
// kernel's, step by step in f32: scale / sqrt(variance + epsilon) once per channel, then one fused
// multiply-add; on a blocked input the relu is its fused one. So on a blocked input the bits are
// the ones it gave (KernelTest.BatchNormNormalizesWithOnednnBits); a plain one (batch_norm_train
// with a mask, or thread-invariant kernels) rounds once where oneDNN's plain kernel multiplied and
// added apart.
bool ownNormalization(KernelCall& call, bool trained) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const int64_t block = channelBlock(x.layout);
  if (channelBlock(y.layout) != block || (block != 0 && block != 8 && block != 16) || (!trained && !block))
    return false;
  const int64_t N = x.dim(0), C = x.dim(1), HW = numElements(x.shape.subspan(2));
  const float *scale = call.in[1].as<float>(), *shift = call.in[2].as<float>();
  const float* mean = trained ? call.out[1].as<float>() : call.in[3].as<float>();
  const float* var = trained ? call.out[2].as<float>() : call.in[4].as<float>();
  const float epsilon = static_cast<float>(normEpsilon(call.step));
  std::vector<float> s(size_t(C), 0.f);
  for (int64_t c = 0; c < C; ++c) s[size_t(c)] = scale[c] / std::sqrt(var[c] + epsilon);
  const bool relu = trained && attrsOf<NormReluAttrs>(call.step).relu;
  const float* in = x.as<float>();
  float* out = y.as<float>();
  const int64_t blocks = block ? C / block : C, groups = N * blocks;
  auto run = [&]<int G, NormRelu Relu>() { normalizeAll<G, Relu>(in, out, groups, blocks, HW, mean, s.data(), shift); };
  if (block == 16) relu ? run.operator()<16, NormRelu::onednn>() : run.operator()<16, NormRelu::none>();
  else if (block == 8) relu ? run.operator()<8, NormRelu::onednn>() : run.operator()<8, NormRelu::none>();
  else relu ? run.operator()<1, NormRelu::op>() : run.operator()<1, NormRelu::none>();
  if (relu && block) reluAfterNorm(call);  // mends the channels where the fused relu met a NaN
  return true;
}

}  // namespace

void batch_norm_train(KernelCall& call) {
  if (call.in[0].numel() == 0) {  // no value per channel (the shape rule refuses it while tracing): 0 / 0
    for (size_t k = 1; k < 3; ++k) visitFloat(call.out[k].dtype, [&](auto tag) {
      std::fill_n(call.out[k].as<decltype(tag)>(), call.out[k].numel(), std::numeric_limits<float>::quiet_NaN());
    });
    return;
  }
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_train(call);
  // Blocked or masked: our statistics, and our normalization (ownNormalization) or oneDNN's
  // with them as given ones (prepareBatchNorm); plain: oneDNN's, which writes them.
  if (ownStatistics(call)) {
    const RowMask rows = rowMask(call, 3, call.in[0]);
    if (int64_t block = channelBlock(call.in[0].layout))
      blockedStatistics(call.in[0], block, rows, call.out[1].as<float>(), call.out[2].as<float>());
    else
      plainStatistics(call.in[0], rows, call.out[1].as<float>(), call.out[2].as<float>());
    if (ownNormalization(call, true)) return;
  }
  NormState& s = cachedState<NormState>(call, [&] { return prepareBatchNorm(call, true); });
  s.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
         {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_DST, call.out[0].data},
         {DNNL_ARG_MEAN, call.out[1].data}, {DNNL_ARG_VARIANCE, call.out[2].data}});
  if (attrsOf<NormReluAttrs>(call.step).relu) reluAfterNorm(call);
}

void batch_norm_infer(KernelCall& call) {
  if (call.out[0].numel() == 0) return;
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_infer(call);
  if (ownNormalization(call, false)) return;
  NormState& s = cachedState<NormState>(call, [&] { return prepareBatchNorm(call, false); });
  s.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
         {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_MEAN, call.in[3].data},
         {DNNL_ARG_VARIANCE, call.in[4].data}, {DNNL_ARG_DST, call.out[0].data}});
}

// inputs: result_grad, input, scale, batch_mean, batch_variance (biased), mask (optional);
// outputs: input_grad, scale_grad, offset_grad. With xhat = (x - mean) * rstd over M values per
// channel: doffset = sum(dy), dscale = sum(dy * xhat), dx = scale * rstd / M * (M dy - doffset -
// xhat dscale); with a mask w, M is W = sum(w) * H * W and the last two terms scale with w_n. Our own kernel, not oneDNN's: the two sums cancel (a BN bias gradient is a sum
// of terms that cancel by a factor of hundreds), and oneDNN adds them in f32 lanes, 3.5x further
// from the exact value than PyTorch; here each channel's sums run in double on one thread in a
// fixed order, so the bits do not depend on the thread count either. Any mix of plain and
// nChw<B>c buffers: element (n, c, i) of an [N, C, HW] view sits at base(n, c) + i * stride.
namespace {

struct ChannelView {
  int64_t C, HW, block;  // block 0: plain
  int64_t base(int64_t n, int64_t c) const {
    return block ? ((n * (C / block) + c / block) * HW) * block + c % block : (n * C + c) * HW;
  }
  int64_t stride() const { return block ? block : 1; }
};

ChannelView channelView(const TensorView& v) {
  int64_t HW = 1;
  for (size_t d = 2; d < v.shape.size(); ++d) HW *= v.shape[d];
  return {v.dim(1), HW, channelBlock(v.layout)};
}

// batch_norm_train's relu, with the NaN rules of the relu op (runtime/base/NanRules.h). oneDNN's
// fused relu (onednnRelu) maps NaN to 0, so the channels whose output can hold a NaN (a
// non-finite mean, variance, scale or shift: finite ones give none) are normalized again here.
void reluAfterNorm(KernelCall& call) {
  float* y = call.out[0].as<float>();
  if (!onednnRelu(call)) {
    const int64_t n = call.out[0].numel();
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = reluOf(y[i]);
    return;
  }
  const float *x = call.in[0].as<float>(), *scale = call.in[1].as<float>(), *shift = call.in[2].as<float>();
  const float *mean = call.out[1].as<float>(), *var = call.out[2].as<float>();
  const ChannelView xAt = channelView(call.in[0]), yAt = channelView(call.out[0]);
  const double eps = normEpsilon(call.step);
  for (int64_t c = 0; c < xAt.C; ++c) {
    if (std::isfinite(mean[c]) && std::isfinite(var[c]) && std::isfinite(scale[c]) && std::isfinite(shift[c])) continue;
    const double inv = 1.0 / std::sqrt(double(var[c]) + eps);
    for (int64_t n = 0; n < call.in[0].dim(0); ++n)
      for (int64_t i = 0; i < xAt.HW; ++i) {
        const double v = (double(x[xAt.base(n, c) + i * xAt.stride()]) - mean[c]) * inv * scale[c] + shift[c];
        y[yAt.base(n, c) + i * yAt.stride()] = reluOf(static_cast<float>(v));
      }
  }
}

}  // namespace

// One group of G channels: the sums, then dx. `Contiguous`: all three buffers are nChw<G>c, so a
// group's lanes are adjacent and the lane loops vectorize (each lane its own sum: no
// reassociation, the same bits with or without vectors). Compiled for AVX-512, AVX2 and the
// baseline (OwnIsa.h), chosen at run time, without fused multiply-adds, so every machine
// gets the same bits.
template <int G, bool Contiguous>
SPMD_ISA_BODY
void backwardGroup(const float* dy, const float* x, float* dx, const ChannelView& dyAt, const ChannelView& xAt,
                   const ChannelView& dxAt, int64_t N, int64_t c0, const float* scale, const float* mean,
                   const float* var, double epsilon, const RowMask& rows, float* dscale, float* doffset) {
  const int64_t HW = xAt.HW, gs = dyAt.stride(), vs = xAt.stride(), os = dxAt.stride();
  const double count = rows.count;
  double sumDy[G] = {}, sumDyX[G] = {}, m[G], rstd[G];
  for (int l = 0; l < G; ++l) m[l] = mean[c0 + l], rstd[l] = 1.0 / std::sqrt(double(var[c0 + l]) + epsilon);
  for (int64_t n = 0; n < N; ++n) {
    if constexpr (Contiguous) {
      const float *g = dy + dyAt.base(n, c0), *v = x + xAt.base(n, c0);
      for (int64_t i = 0; i < HW; ++i)
        for (int l = 0; l < G; ++l) {
          double d = g[i * G + l];
          sumDy[l] += d;
          sumDyX[l] += d * (double(v[i * G + l]) - m[l]);
        }
    } else {
      // Eight running sums (elements i mod 8), added in a fixed order: vectorizable, and the
      // same bits on any machine and thread count.
      for (int l = 0; l < G; ++l) {
        const float *g = dy + dyAt.base(n, c0 + l), *v = x + xAt.base(n, c0 + l);
        double s[8] = {}, sx[8] = {};
        int64_t i = 0;
        if (gs == 1 && vs == 1)
          for (; i + 8 <= HW; i += 8)
            for (int k = 0; k < 8; ++k) {
              double d = g[i + k];
              s[k] += d;
              sx[k] += d * (double(v[i + k]) - m[l]);
            }
        for (; i < HW; ++i) {
          double d = g[i * gs];
          s[i % 8] += d;
          sx[i % 8] += d * (double(v[i * vs]) - m[l]);
        }
        sumDy[l] += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
        sumDyX[l] += ((sx[0] + sx[1]) + (sx[2] + sx[3])) + ((sx[4] + sx[5]) + (sx[6] + sx[7]));
      }
    }
  }
  // dx = a dy + b (x - mean) + d, per channel; with a mask, b and d scale with the row's weight.
  float a[G], b[G], d0[G], mf[G];
  double bw[G], dw[G];  // b and d per unit weight
  for (int l = 0; l < G; ++l) {
    const double dyXhat = sumDyX[l] * rstd[l], al = double(scale[c0 + l]) * rstd[l];
    doffset[c0 + l] = float(sumDy[l]);
    dscale[c0 + l] = float(dyXhat);
    bw[l] = -al * rstd[l] * dyXhat, dw[l] = -al * sumDy[l];
    a[l] = float(al), b[l] = count > 0 ? float(bw[l] / count) : 0.0f, d0[l] = count > 0 ? float(dw[l] / count) : 0.0f;
    mf[l] = mean[c0 + l];
  }
  for (int64_t n = 0; n < N; ++n) {
    if (rows.mask) {
      const double w = rows.weight(n);
      for (int l = 0; l < G; ++l)
        b[l] = count > 0 ? float(bw[l] * w / count) : 0.0f, d0[l] = count > 0 ? float(dw[l] * w / count) : 0.0f;
    }
    if constexpr (Contiguous) {
      const float *g = dy + dyAt.base(n, c0), *v = x + xAt.base(n, c0);
      float* out = dx + dxAt.base(n, c0);
      for (int64_t i = 0; i < HW; ++i)
        for (int l = 0; l < G; ++l) out[i * G + l] = a[l] * g[i * G + l] + b[l] * (v[i * G + l] - mf[l]) + d0[l];
    } else {
      for (int l = 0; l < G; ++l) {
        const float *g = dy + dyAt.base(n, c0 + l), *v = x + xAt.base(n, c0 + l);
        float* out = dx + dxAt.base(n, c0 + l);
        for (int64_t i = 0; i < HW; ++i) out[i * os] = a[l] * g[i * gs] + b[l] * (v[i * vs] - mf[l]) + d0[l];
      }
    }
  }
}

void batch_norm_train_backward(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_train_backward(call);
  const TensorView &dyView = call.in[0], &xView = call.in[1];
  const int64_t N = xView.dim(0), C = xView.dim(1);
  const ChannelView dyAt = channelView(dyView), xAt = channelView(xView), dxAt = channelView(call.out[0]);
  const double epsilon = normEpsilon(call.step);
  const float *dy = dyView.as<float>(), *x = xView.as<float>(), *scale = call.in[2].as<float>(),
              *mean = call.in[3].as<float>(), *var = call.in[4].as<float>();
  float *dx = call.out[0].as<float>(), *dscale = call.out[1].as<float>(), *doffset = call.out[2].as<float>();
  const RowMask rows = rowMask(call, 5, xView);
  // Channels in groups (a block of a blocked buffer when all three share one), a group per
  // thread at a time, so each cache line of a blocked buffer is read once per pass.
  const int64_t block = xAt.block;
  const bool contiguous = block && dyAt.block == block && dxAt.block == block;
  const int64_t G = contiguous ? block : 1;
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += G) {
    auto run = [&](auto group) {
      constexpr int g = decltype(group)::value;
      constexpr bool same = g > 1;
      onOwnIsa<backwardGroup<g, same>>(dy, x, dx, dyAt, xAt, dxAt, N, c0, scale, mean, var, epsilon, rows, dscale, doffset);
    };
    if (G == 16) run(std::integral_constant<int, 16>{});
    else if (G == 8) run(std::integral_constant<int, 8>{});
    else run(std::integral_constant<int, 1>{});
  }
}

}  // namespace spmd::runtime::cpu
