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
// Index arithmetic is 32-bit (runs() refuses larger tensors) through Divide.h's dividers. f32
// and f64 sum in their own type; bf16 operands go to the GEMM as they are (tensor cores on CUDA)
// and their products are summed in f32, each result rounded to bf16 once, as cuDNN's bf16
// convolutions do: a chance for bf16 steps where cuDNN's NCHW kernels transpose to NHWC.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Convert.h"
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
  DType dtype = DType::f32;  // A's and B's
  bool accumulate = false;  // C += op(A) op(B)
  DType output = DType::f32;  // C's: A's, or f32 for bf16 operands (their products summed in f32)
};

// The type a GEMM of T operands sums and writes in: T, or f32 for bf16.
template <typename T>
struct GemmSum {
  using type = T;
};
template <>
struct GemmSum<bf16> {
  using type = float;
};

// The simulator's GEMM: one element of C a call, summed in S in order of l.
template <typename T, typename S = typename GemmSum<T>::type>
struct GemmFn {
  GemmArgs g;
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t i = e / g.n, j = e % g.n;
    const T* a = static_cast<const T*>(g.a);
    const T* b = static_cast<const T*>(g.b);
    S sum = 0;
    for (int64_t l = 0; l < g.k; ++l)
      sum += convertValue<S>(g.transA ? a[l * g.lda + i] : a[i * g.lda + l]) *
             convertValue<S>(g.transB ? b[j * g.ldb + l] : b[l * g.ldb + j]);
    S& c = static_cast<S*>(g.c)[i * g.ldc + j];
    c = g.accumulate ? S(c + sum) : sum;
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
  const auto& a = convAttrs(step);
  if (!a.plain()) return false;  // one GEMM a convolution: neither dilated nor grouped
  const int64_t k = x[1] * w[2] * w[3], np = x[0] * y[2] * y[3];
  for (int64_t count : {numElements(x), numElements(w), numElements(y), k * np, w[0] * np})
    if (count >= kConvGemmMaxElements) return false;
  *g = {uint32_t(x[0]), uint32_t(x[1]), uint32_t(x[2]),     uint32_t(x[3]),     uint32_t(w[0]),
        uint32_t(w[2]), uint32_t(w[3]), uint32_t(y[2]),     uint32_t(y[3]),     uint32_t(a.stride[0]),
        uint32_t(a.stride[1]), uint32_t(a.padding[0]), uint32_t(a.padding[1])};
  return true;
}

// The scratch of a chunk of `chunk` images, with `sumBytes` a GEMM result element (GemmSum's):
// the columns (K x chunk*P) and the channel-major result or gradient (co x chunk*P), counted at
// the wider of the operands' and the sums' size, and the filter gradient's sums (co x K, when
// they are wider than its elements), each region 256-byte aligned.
inline size_t alignedScratch(size_t bytes) { return (bytes + 255) / 256 * 256; }
inline size_t convGemmScratchBytes(const ConvGeometry& g, uint32_t chunk, size_t sumBytes) {
  const size_t columns = size_t(g.positions()) * chunk;
  return alignedScratch(size_t(g.taps()) * columns * sumBytes) + alignedScratch(size_t(g.co) * columns * sumBytes) +
         alignedScratch(size_t(g.co) * g.taps() * sumBytes);
}
// Images a chunk of the batch holds so that its scratch is at most `capBytes` (at least one).
inline uint32_t convGemmChunk(const ConvGeometry& g, size_t sumBytes, size_t capBytes) {
  const size_t fixed = convGemmScratchBytes(g, 0, sumBytes), perImage = convGemmScratchBytes(g, 1, sumBytes) - fixed;
  return uint32_t(std::clamp<size_t>(capBytes > fixed ? (capBytes - fixed) / perImage : 0, 1, g.n));
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
    cols[i] = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w ? x[((int64_t(b) * g.c + ci) * g.h + iy) * g.w + ix] : T{};
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

// dst[b, ch, p] = src[ch, b*P + p] (+ bias[ch] when there is one, then max(0, .) with relu): the
// forward's result back, added in S (the GEMM's sums) and rounded to T once (relu commutes with
// the rounding).
template <typename S, typename T>
struct FromChannelMajorFn {
  const S* src;
  const T* bias;  // null: none
  T* dst;
  uint32_t n, channels, positions;
  bool relu;
  Divider byPositions, byChannels;  // P, channels
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const uint32_t i = uint32_t(e), q = byPositions.quotient(i), p = i - q * positions, b = byChannels.quotient(q),
                   ch = q - b * channels;
    const S v = src[int64_t(ch) * (n * positions) + int64_t(b) * positions + p];
    const S sum = bias ? S(v + convertValue<S>(bias[ch])) : v;
    dst[i] = convertValue<T>(relu ? reluOf(sum) : sum);
  }
};

template <typename S, typename T>
FromChannelMajorFn<S, T> fromChannelMajor(const S* src, const T* bias, T* dst, uint32_t n, uint32_t channels,
                                          uint32_t positions, bool relu) {
  return {src, bias, dst, n, channels, positions, relu, dividerOf(positions), dividerOf(channels)};
}

// dx[b, ci, iy, ix] = the sum of dcols over the taps that read it, in (ky, kx) order, in double.
template <typename S, typename T>
struct Col2imFn {
  const S* dcols;
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
    dx[i] = convertValue<T>(sum);
  }
};

template <typename S, typename T>
Col2imFn<S, T> col2im(const S* dcols, T* dx, const ConvGeometry& g) {
  return {dcols, dx, g, dividerOf(g.w), dividerOf(g.h), dividerOf(g.c)};
}

// The three directions on `Api`, `chunk` images at a time (the last chunk may be shorter), the
// GEMM through `gemm(call, GemmArgs)` with its sums in S = GemmSum<T> (f32 for bf16: the
// products of bf16 operands summed in f32, each result rounded to bf16 once), in `scratch` of
// convGemmScratchBytes(whole, chunk, sizeof(S)). The filter gradient sums the chunks' products in
// order (the GEMM accumulates from the second chunk on). Operands as the op's kernels take them:
//   conv2d: in x, w[, bias], out y; conv2d_backward_data: in dy, w, out dx;
//   conv2d_backward_filter: in x, dy, out dw.
template <class Api, typename T, class Gemm>
void convGemm(KernelCall& call, const ConvGeometry& whole, uint32_t chunk, std::byte* scratch, Gemm gemm) {
  using S = typename GemmSum<T>::type;
  const std::string& op = call.step.op;
  const DType dtype = call.out[0].dtype, sums = sizeof(S) == sizeof(T) ? dtype : DType::f32;
  const int64_t imageX = int64_t(whole.c) * whole.h * whole.w, imageY = int64_t(whole.co) * whole.positions();
  // The regions, as convGemmScratchBytes lays them out: [K, NP] columns (T, or S for dcols),
  // [co, NP] channel-major (S for yT, T for dyT), [co, K] filter-gradient sums (S).
  const size_t columns = size_t(whole.positions()) * chunk, columnsAt = 0,
               channelsAt = alignedScratch(size_t(whole.taps()) * columns * sizeof(S)),
               filterAt = channelsAt + alignedScratch(size_t(whole.co) * columns * sizeof(S));
  const bool wideFilter = sizeof(S) != sizeof(T);
  S* filterSums = wideFilter ? reinterpret_cast<S*>(scratch + filterAt) : call.out[0].as<S>();
  for (uint32_t first = 0; first < whole.n; first += chunk) {
    ConvGeometry g = whole;
    g.n = whole.n - first < chunk ? whole.n - first : chunk;
    const int64_t k = g.taps(), np = g.columns();
    if (op == "conv2d") {
      T* cols = reinterpret_cast<T*>(scratch + columnsAt);
      S* yT = reinterpret_cast<S*>(scratch + channelsAt);
      const T* bias = call.in.size() > 2 ? call.in[2].as<T>() : nullptr;
      Api::forEach(call, k * np, im2col(call.in[0].as<T>() + first * imageX, cols, g));
      gemm(call, GemmArgs{false, false, g.co, np, k, call.in[1].data, k, cols, np, yT, np, dtype, false, sums});
      Api::forEach(call, int64_t(g.co) * np,
                   fromChannelMajor(yT, bias, call.out[0].as<T>() + first * imageY, g.n, g.co, g.positions(),
                                    convAttrs(call.step).relu));
    } else if (op == "conv2d_backward_data") {
      S* dcols = reinterpret_cast<S*>(scratch + columnsAt);
      T* dyT = reinterpret_cast<T*>(scratch + channelsAt);
      Api::forEach(call, int64_t(g.co) * np, toChannelMajor(call.in[0].as<T>() + first * imageY, dyT, g.n, g.co, g.positions()));
      gemm(call, GemmArgs{true, false, k, np, g.co, call.in[1].data, k, dyT, np, dcols, np, dtype, false, sums});
      Api::forEach(call, int64_t(g.n) * imageX, col2im(dcols, call.out[0].as<T>() + first * imageX, g));
    } else {
      T* cols = reinterpret_cast<T*>(scratch + columnsAt);
      T* dyT = reinterpret_cast<T*>(scratch + channelsAt);
      Api::forEach(call, k * np, im2col(call.in[0].as<T>() + first * imageX, cols, g));
      Api::forEach(call, int64_t(g.co) * np, toChannelMajor(call.in[1].as<T>() + first * imageY, dyT, g.n, g.co, g.positions()));
      gemm(call, GemmArgs{false, true, g.co, k, np, dyT, np, cols, np, filterSums, k, dtype, first > 0, sums});
    }
  }
  if (op == "conv2d_backward_filter" && wideFilter)
    Api::forEach(call, int64_t(whole.co) * whole.taps(), ConvertFn<T, S>{filterSums, call.out[0].as<T>()});
}

// The bytes of one GEMM sum for operands of `dtype` (GemmSum's: f32 for bf16).
inline size_t convGemmSumBytes(DType dtype) { return dtype == DType::bf16 ? sizeof(float) : dtypeSize(dtype); }

// convGemm for the step's element type (f32, f64 or bf16).
template <class Api, class Gemm>
void convGemmOf(KernelCall& call, const ConvGeometry& whole, uint32_t chunk, std::byte* scratch, Gemm gemm) {
  switch (call.out[0].dtype) {
    case DType::f32: return convGemm<Api, float>(call, whole, chunk, scratch, gemm);
    case DType::f64: return convGemm<Api, double>(call, whole, chunk, scratch, gemm);
    case DType::bf16: return convGemm<Api, bf16>(call, whole, chunk, scratch, gemm);
    default: throw Error("the GEMM convolution of '" + call.step.op + "' takes f32, f64 or bf16");
  }
}

// The geometry of a convolution step from its operands (any direction; see convGemm).
inline bool convGeometryOf(const KernelCall& call, ConvGeometry* g) {
  for (std::span<const TensorView> views : {call.in, call.out})
    for (const TensorView& v : views)
      if (!v.layout.empty()) return false;  // the unfolding reads plain NCHW
  const std::string& op = call.step.op;
  if (op == "conv2d") return convGeometry(call.step, call.in[0].shape, call.in[1].shape, call.out[0].shape, g);
  if (op == "conv2d_backward_data")
    return convGeometry(call.step, call.out[0].shape, call.in[1].shape, call.in[0].shape, g);
  return convGeometry(call.step, call.in[0].shape, call.out[0].shape, call.in[1].shape, g);
}

}  // namespace spmd::runtime::kernels
