// Convolutions as one GEMM each, for the GPU-like backends: the input unfolded into columns
// (im2col), the filter product one GEMM (cuBLAS on CUDA: runtime/cuda/ConvGemm.cu; the
// simulator's stand-in: runtime/sim/SimKernels.cpp), the result folded back. A variant beside
// cuDNN's algorithms, chosen by timing where it is faster: cuDNN's deterministic algorithms are
// slow on small strided layers (on an H200, ResNet-18's 3x3 stride-2 stage-4 backward data took
// 2.35 ms where the nondeterministic one took 0.55; its 1x1 stride-2 backward filters 6-12x its
// nondeterministic time), and a GEMM over the whole batch is one large deterministic product.
//
// With P = oh*ow output positions, K = c*kh*kw filter taps and NP = n*P, every matrix row-major:
//   cols[K, NP]    cols[(ci*kh + ky)*kw + kx, b*P + oy*ow + ox] = x[b, ci, oy*sh - ph + ky, ox*sw - pw + kx]
//                  (0 in the padding)
//   forward        yT[co, NP] = w[co, K] cols[K, NP]; y[b, co, p] = yT[co, b*P + p] (+ bias[co])
//   backward data  dyT[co, NP] from dy; dcols[K, NP] = w^T dyT; dx gathers its taps from dcols
//   backward filter  dyT, cols; dw[co, K] = dyT cols^T (one sum over the whole batch)
// Every element is written by one thread, and dx sums its taps in a fixed order, so the bits
// depend on the GEMM's alone (cuBLAS's are the same on every run on one GPU kind and version).
// Index arithmetic is 32-bit (runs() refuses larger tensors) through Divide.h's dividers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Divide.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

// C[m, n] = op(A)[m, k] op(B)[k, n], row-major with leading dimensions (elements between rows)
// lda, ldb, ldc; op(A) = A^T (A stored [k, m]) when transA. C is overwritten, or added to.
struct GemmArgs {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  DType dtype = DType::f32;
  bool accumulate = false;  // C += op(A) op(B)
};

// The simulator's GEMM: one element of C a call, summed in T in order of l.
template <typename T>
struct GemmFn {
  GemmArgs g;
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t i = e / g.n, j = e % g.n;
    const T* a = static_cast<const T*>(g.a);
    const T* b = static_cast<const T*>(g.b);
    T sum = 0;
    for (int64_t l = 0; l < g.k; ++l)
      sum += (g.transA ? a[l * g.lda + i] : a[i * g.lda + l]) * (g.transB ? b[j * g.ldb + l] : b[l * g.ldb + j]);
    T& c = static_cast<T*>(g.c)[i * g.ldc + j];
    c = g.accumulate ? T(c + sum) : sum;
  }
};

// One convolution's sizes: x [n, c, h, w], filter [co, c, kh, kw], y [n, co, oh, ow].
struct ConvGeometry {
  uint32_t n, c, h, w, co, kh, kw, oh, ow, sh, sw, ph, pw;
  SPMD_HOST_DEVICE uint32_t positions() const { return oh * ow; }  // P
  SPMD_HOST_DEVICE uint32_t taps() const { return c * kh * kw; }   // K
  SPMD_HOST_DEVICE uint32_t columns() const { return n * oh * ow; }  // NP
};

// Element counts above this take the library's convolution (32-bit indices).
constexpr int64_t kConvGemmMaxElements = int64_t(1) << 31;

// The geometry of a step whose x, filter and y (forward's roles) are given; false when an index
// would pass 32 bits.
inline bool convGeometry(const Step& step, std::span<const int64_t> x, std::span<const int64_t> w,
                         std::span<const int64_t> y, ConvGeometry* g) {
  const auto& a = attrsOf<ConvAttrs>(step);
  const int64_t k = x[1] * w[2] * w[3], np = x[0] * y[2] * y[3];
  for (int64_t count : {numElements(x), numElements(w), numElements(y), k * np, w[0] * np})
    if (count >= kConvGemmMaxElements) return false;
  *g = {uint32_t(x[0]), uint32_t(x[1]), uint32_t(x[2]),     uint32_t(x[3]),     uint32_t(w[0]),
        uint32_t(w[2]), uint32_t(w[3]), uint32_t(y[2]),     uint32_t(y[3]),     uint32_t(a.stride[0]),
        uint32_t(a.stride[1]), uint32_t(a.padding[0]), uint32_t(a.padding[1])};
  return true;
}

// Images a chunk of the batch holds so that its scratch, the columns (K x chunk*P) and the
// channel-major result or gradient (co x chunk*P), is at most `capBytes` (at least one image);
// and that scratch's elements.
inline uint32_t convGemmChunk(const ConvGeometry& g, size_t elementBytes, size_t capBytes) {
  const size_t perImage = (size_t(g.taps()) + g.co) * g.positions() * elementBytes;
  return uint32_t(std::clamp<size_t>(capBytes / perImage, 1, g.n));
}
inline int64_t convGemmScratchElements(const ConvGeometry& g, uint32_t chunk) {
  return (int64_t(g.taps()) + g.co) * g.positions() * chunk;
}

// cols[K, NP] from x (zeros in the padding).
template <typename T>
struct Im2colFn {
  const T* x;
  T* cols;
  ConvGeometry g;
  Divider byColumns, byWidth, byHeight, byPositions, byOutWidth;  // NP, kw, kh, P, ow
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const uint32_t i = uint32_t(e), r = byColumns.quotient(i), j = i - r * g.columns();
    const uint32_t r1 = byWidth.quotient(r), kx = r - r1 * g.kw, ci = byHeight.quotient(r1), ky = r1 - ci * g.kh;
    const uint32_t b = byPositions.quotient(j), p = j - b * g.positions(), oy = byOutWidth.quotient(p),
                   ox = p - oy * g.ow;
    const int64_t iy = int64_t(oy) * g.sh - g.ph + ky, ix = int64_t(ox) * g.sw - g.pw + kx;
    cols[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[((int64_t(b) * g.c + ci) * g.h + iy) * g.w + ix] : T(0);
  }
};

template <typename T>
Im2colFn<T> im2col(const T* x, T* cols, const ConvGeometry& g) {
  return {x, cols, g, dividerOf(g.columns()), dividerOf(g.kw), dividerOf(g.kh), dividerOf(g.positions()),
          dividerOf(g.ow)};
}

// dst[ch, b*P + p] = src[b, ch, p]: an NCHW tensor [n, channels, P] as a [channels, n*P] matrix.
template <typename T>
struct ToChannelMajorFn {
  const T* src;
  T* dst;
  uint32_t n, channels, positions;
  Divider byColumns, byPositions;  // n*P, P
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const uint32_t i = uint32_t(e), ch = byColumns.quotient(i), j = i - ch * (n * positions),
                   b = byPositions.quotient(j), p = j - b * positions;
    dst[i] = src[(int64_t(b) * channels + ch) * positions + p];
  }
};

template <typename T>
ToChannelMajorFn<T> toChannelMajor(const T* src, T* dst, uint32_t n, uint32_t channels, uint32_t positions) {
  return {src, dst, n, channels, positions, dividerOf(n * positions), dividerOf(positions)};
}

// dst[b, ch, p] = src[ch, b*P + p] (+ bias[ch] when there is one): the forward's result back.
template <typename T>
struct FromChannelMajorFn {
  const T* src;
  const T* bias;  // null: none
  T* dst;
  uint32_t n, channels, positions;
  Divider byPositions, byChannels;  // P, channels
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const uint32_t i = uint32_t(e), q = byPositions.quotient(i), p = i - q * positions, b = byChannels.quotient(q),
                   ch = q - b * channels;
    const T v = src[int64_t(ch) * (n * positions) + int64_t(b) * positions + p];
    dst[i] = bias ? T(v + bias[ch]) : v;
  }
};

template <typename T>
FromChannelMajorFn<T> fromChannelMajor(const T* src, const T* bias, T* dst, uint32_t n, uint32_t channels,
                                       uint32_t positions) {
  return {src, bias, dst, n, channels, positions, dividerOf(positions), dividerOf(channels)};
}

// dx[b, ci, iy, ix] = the sum of dcols over the taps that read it, in (ky, kx) order, in double.
template <typename T>
struct Col2imFn {
  const T* dcols;
  T* dx;
  ConvGeometry g;
  Divider byWidth, byHeight, byChannels;  // w, h, c
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const uint32_t i = uint32_t(e), r = byWidth.quotient(i), ix = i - r * g.w, r1 = byHeight.quotient(r),
                   iy = r - r1 * g.h, b = byChannels.quotient(r1), ci = r1 - b * g.c;
    double sum = 0;
    const int32_t sh = int32_t(g.sh), sw = int32_t(g.sw);
    for (int32_t ky = 0; ky < int32_t(g.kh); ++ky) {
      const int32_t ty = int32_t(iy) + int32_t(g.ph) - ky;  // oy * sh
      if (ty < 0 || ty % sh != 0 || ty / sh >= int32_t(g.oh)) continue;
      for (int32_t kx = 0; kx < int32_t(g.kw); ++kx) {
        const int32_t tx = int32_t(ix) + int32_t(g.pw) - kx;
        if (tx < 0 || tx % sw != 0 || tx / sw >= int32_t(g.ow)) continue;
        const int64_t row = (int64_t(ci) * g.kh + ky) * g.kw + kx,
                      column = int64_t(b) * g.positions() + (ty / sh) * int64_t(g.ow) + tx / sw;
        sum += double(dcols[row * g.columns() + column]);
      }
    }
    dx[i] = T(sum);
  }
};

template <typename T>
Col2imFn<T> col2im(const T* dcols, T* dx, const ConvGeometry& g) {
  return {dcols, dx, g, dividerOf(g.w), dividerOf(g.h), dividerOf(g.c)};
}

// The three directions on `Api`, `chunk` images at a time (the last chunk may be shorter), the
// GEMM through `gemm(call, GemmArgs)`, in `scratch` of convGemmScratchElements(whole, chunk)
// elements of T. The filter gradient sums the chunks' products in order (the GEMM accumulates
// from the second chunk on). Operands as the op's kernels take them:
//   conv2d: in x, w[, bias], out y; conv2d_backward_data: in dy, w, out dx;
//   conv2d_backward_filter: in x, dy, out dw.
template <class Api, typename T, class Gemm>
void convGemm(KernelCall& call, const ConvGeometry& whole, uint32_t chunk, T* scratch, Gemm gemm) {
  const std::string& op = call.step.op;
  const DType dtype = call.out[0].dtype;
  const int64_t imageX = int64_t(whole.c) * whole.h * whole.w, imageY = int64_t(whole.co) * whole.positions();
  for (uint32_t first = 0; first < whole.n; first += chunk) {
    ConvGeometry g = whole;
    g.n = whole.n - first < chunk ? whole.n - first : chunk;
    const int64_t k = g.taps(), np = g.columns();
    T* cols = scratch;                // cols or dcols, [K, NP]
    T* channelMajor = cols + k * np;  // yT or dyT, [co, NP]
    if (op == "conv2d") {
      const T* bias = call.in.size() > 2 ? call.in[2].as<T>() : nullptr;
      Api::forEach(call, k * np, im2col(call.in[0].as<T>() + first * imageX, cols, g));
      gemm(call, GemmArgs{false, false, g.co, np, k, call.in[1].data, k, cols, np, channelMajor, np, dtype});
      Api::forEach(call, int64_t(g.co) * np,
                   fromChannelMajor(channelMajor, bias, call.out[0].as<T>() + first * imageY, g.n, g.co, g.positions()));
    } else if (op == "conv2d_backward_data") {
      Api::forEach(call, int64_t(g.co) * np,
                   toChannelMajor(call.in[0].as<T>() + first * imageY, channelMajor, g.n, g.co, g.positions()));
      gemm(call, GemmArgs{true, false, k, np, g.co, call.in[1].data, k, channelMajor, np, cols, np, dtype});
      Api::forEach(call, int64_t(g.n) * imageX, col2im(cols, call.out[0].as<T>() + first * imageX, g));
    } else {
      Api::forEach(call, k * np, im2col(call.in[0].as<T>() + first * imageX, cols, g));
      Api::forEach(call, int64_t(g.co) * np,
                   toChannelMajor(call.in[1].as<T>() + first * imageY, channelMajor, g.n, g.co, g.positions()));
      gemm(call, GemmArgs{false, true, g.co, k, np, channelMajor, np, cols, np, call.out[0].data, k, dtype, first > 0});
    }
  }
}

// The geometry of a convolution step from its operands (any direction; see convGemm).
inline bool convGeometryOf(const KernelCall& call, ConvGeometry* g) {
  const std::string& op = call.step.op;
  if (op == "conv2d") return convGeometry(call.step, call.in[0].shape, call.in[1].shape, call.out[0].shape, g);
  if (op == "conv2d_backward_data")
    return convGeometry(call.step, call.out[0].shape, call.in[1].shape, call.in[0].shape, g);
  return convGeometry(call.step, call.in[0].shape, call.out[0].shape, call.in[1].shape, g);
}

}  // namespace spmd::runtime::kernels
