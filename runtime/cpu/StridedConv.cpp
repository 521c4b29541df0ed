// Stride-2 convolutions (3x3 with padding 1, 1x1 without) as GEMMs on nChw<B>c activations. With
// P = OH * OW output pixels per image, T = k * k taps of a k x k filter and K = T * C window
// columns (column (kh * k + kw) * C + c, so that each tap's channels are contiguous, as in the
// blocked layout):
//   forward:         col[p][k] = x at p's window tap k (zero outside),  Y = col Wt^T,  y = Y + bias
//   backward data:   dcol = dY Wt,  dx = the sum of each dcol row at its window's taps (col2im)
//   backward filter: dWt^T = col^T dY (K x O), summed over the chunks
// where Wt[o][(kh * k + kw) * C + c] = w[o][c][kh][kw] and Y, dY are [P, O] row-major per image.
// Images go through in equal chunks (the last one padded with zero rows); the GEMMs are one-thread
// oneDNN matmuls on fixed slices of their result's rows (sliced::Gemm), the gathers and scatters
// run on the OpenMP pool. The arithmetic outside the GEMMs is the bias add and col2im's sums,
// each in a fixed order: the same bits for any thread count.
#include "runtime/cpu/StridedConv.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "runtime/cpu/BlockedLoops.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/SlicedOnednn.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu::strided {
namespace {

// One call's activations: input [N, C, H, W], output [N, O, OH, OW], both nChw<B>c; a k x k
// filter (k = 3 or 1) with padding (k - 1) / 2.
struct Shape {
  int64_t N, C, H, W, O, OH, OW, B, k;
  int64_t pixels() const { return OH * OW; }
  int64_t taps() const { return k * k; }
  int64_t columns() const { return taps() * C; }
  int64_t pad() const { return (k - 1) / 2; }
};

Shape shapeOf(const TensorView& in, const TensorView& out, const TensorView& filter) {
  return {in.dim(0),  in.dim(1),  in.dim(2),  in.dim(3),          out.dim(1),
          out.dim(2), out.dim(3), channelBlock(in.layout), filter.dim(2)};
}

std::atomic<int64_t> chunkFloats{int64_t{1} << 22};  // 16 MB of window matrix

// Equal chunks of `images` images (count of them), `rows` = images * pixels matrix rows each.
struct Chunks {
  int64_t images, count, rows;
  explicit Chunks(const Shape& s) {
    const int64_t most = std::max<int64_t>(1, chunkFloats.load() / (s.pixels() * s.columns()));
    count = (s.N + most - 1) / most;
    images = (s.N + count - 1) / count;
    rows = images * s.pixels();
  }
};

// Window matrix rows [r0, r1) of the chunk starting at image n0 (rows of images past the last
// are zero).
template <int B>
void windowRows(const float* x, const Shape& s, int64_t n0, int64_t r0, int64_t r1, float* col) {
  const int64_t P = s.pixels(), K = s.columns(), CB = s.C / B;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = n0 + r / P, oh = (r % P) / s.OW, ow = r % s.OW;
    for (int64_t kh = 0; kh < s.k; ++kh)
      for (int64_t kw = 0; kw < s.k; ++kw) {
        float* dst = col + r * K + (kh * s.k + kw) * s.C;
        const int64_t h = 2 * oh - s.pad() + kh, w = 2 * ow - s.pad() + kw;
        if (n >= s.N || h < 0 || h >= s.H || w < 0 || w >= s.W) {
          std::memset(dst, 0, sizeof(float) * s.C);
          continue;
        }
        for (int64_t cb = 0; cb < CB; ++cb)
          std::memcpy(dst + cb * B, x + (((n * CB + cb) * s.H + h) * s.W + w) * B, sizeof(float) * B);
      }
  }
}

// Rows [r0, r1) of the [rows, O] matrix of the chunk's output-shaped tensor y (zero past the
// last image).
template <int B>
void gatherRows(const float* y, const Shape& s, int64_t n0, int64_t r0, int64_t r1, float* mat) {
  const int64_t P = s.pixels(), OB = s.O / B;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = n0 + r / P, p = r % P;
    float* row = mat + r * s.O;
    if (n >= s.N) {
      std::memset(row, 0, sizeof(float) * s.O);
      continue;
    }
    for (int64_t ob = 0; ob < OB; ++ob)
      std::memcpy(row + ob * B, y + ((n * OB + ob) * P + p) * B, sizeof(float) * B);
  }
}

// y (+ bias) from rows [r0, r1) of the [rows, O] matrix (rows past the last image dropped).
template <int B>
void scatterRows(const float* mat, const float* bias, const Shape& s, int64_t n0, int64_t r0,
                 int64_t r1, float* y) {
  const int64_t P = s.pixels(), OB = s.O / B;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = n0 + r / P, p = r % P;
    if (n >= s.N) break;
    const float* row = mat + r * s.O;
    for (int64_t ob = 0; ob < OB; ++ob) {
      float* out = y + ((n * OB + ob) * P + p) * B;
      for (int l = 0; l < B; ++l) out[l] = bias ? row[ob * B + l] + bias[ob * B + l] : row[ob * B + l];
    }
  }
}

// dx of chunk image i (if it exists): zeroed, then every output pixel's window gradient added at
// its taps, pixels and taps in order.
template <int B>
void addWindows(const float* dcol, const Shape& s, int64_t n0, int64_t i, float* dx) {
  const int64_t n = n0 + i;
  if (n >= s.N) return;
  const int64_t P = s.pixels(), K = s.columns(), CB = s.C / B, HW = s.H * s.W;
  float* image = dx + n * s.C * HW;
  std::memset(image, 0, sizeof(float) * s.C * HW);
  for (int64_t p = 0; p < P; ++p) {
    const int64_t oh = p / s.OW, ow = p % s.OW;
    const float* row = dcol + (i * P + p) * K;
    for (int64_t kh = 0; kh < s.k; ++kh)
      for (int64_t kw = 0; kw < s.k; ++kw) {
        const int64_t h = 2 * oh - s.pad() + kh, w = 2 * ow - s.pad() + kw;
        if (h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
        const float* src = row + (kh * s.k + kw) * s.C;
        for (int64_t cb = 0; cb < CB; ++cb) {
          float* out = image + (cb * HW + h * s.W + w) * B;
          for (int l = 0; l < B; ++l) out[l] += src[cb * B + l];
        }
      }
  }
}

constexpr int64_t kGrain = 16;

// Wt[o][t * C + c] = w[o][c][t] for the T taps t = kh * k + kw, and back.
void tapsMajor(const float* w, int64_t O, int64_t C, int64_t T, float* wt) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < T; ++t) wt[(o * T + t) * C + c] = w[(o * C + c) * T + t];
}

// w[o][c][t] from wt^T[(t * C + c)][o] (the backward filter's [K, O] result).
void channelsMajorFromColumns(const float* wtT, int64_t O, int64_t C, int64_t T, float* w) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < T; ++t) w[(o * C + c) * T + t] = wtT[(t * C + c) * O + o];
}

// [r, c] matrices: row-major, or the transpose of a row-major [c, r] one.
dnnl::memory::desc rowMajor(int64_t r, int64_t c) {
  return {{r, c}, dnnl::memory::data_type::f32, dnnl::memory::dims{c, 1}};
}
dnnl::memory::desc transposed(int64_t r, int64_t c) {
  return {{r, c}, dnnl::memory::data_type::f32, dnnl::memory::dims{1, r}};
}

struct State {
  Chunks chunks;
  sliced::Gemm first, rest;  // rest: the backward filter's accumulating GEMM
};


}  // namespace

namespace {

// The filter's size (3 or 1) when the step is a stride-2 convolution these GEMMs compute: f32,
// activations in one blocked layout of whole channel blocks, padding (k - 1) / 2; else 0.
int64_t filterSize(const KernelCall& call) {
  if (call.in.size() < 2 || call.out.empty()) return 0;
  const std::string& op = call.step.op;
  const bool data = op == "conv2d_backward_data", filter = op == "conv2d_backward_filter";
  const TensorView& x = data ? call.out[0] : call.in[0];
  const TensorView& y = op == "conv2d" ? call.out[0] : call.in[data ? 0 : 1];
  const TensorView& w = filter ? call.out[0] : call.in[1];
  if (x.dtype != DType::f32 || x.rank() != 4 || y.rank() != 4 || w.rank() != 4) return 0;
  if (x.layout.empty() || x.layout != y.layout) return 0;
  const int64_t block = channelBlock(x.layout);
  if (x.dim(1) % block || y.dim(1) % block || w.dim(0) != y.dim(1) || w.dim(1) != x.dim(1)) return 0;
  const int64_t k = w.dim(2), pad = (k - 1) / 2;
  const auto& stride = convAttrs(call.step).stride;
  const auto& padding = convAttrs(call.step).padding;
  if (w.dim(3) != k || stride != std::vector<int64_t>{2, 2} || padding != std::vector<int64_t>{pad, pad} ||
      y.dim(2) != (x.dim(2) + 2 * pad - k) / 2 + 1 || y.dim(3) != (x.dim(3) + 2 * pad - k) / 2 + 1)
    return 0;
  return k == 3 || k == 1 ? k : 0;
}

}  // namespace

bool runs(const KernelCall& call) { return filterSize(call) != 0; }

bool pays(const KernelCall& call) {
  const int64_t k = filterSize(call);
  const TensorView& x = call.step.op == "conv2d_backward_data" ? call.out[0] : call.in[0];
  const TensorView& y = call.step.op == "conv2d" ? call.out[0] : call.in[call.step.op == "conv2d_backward_data" ? 0 : 1];
  if (k == 3) return x.dim(1) >= 128;
  // 1x1: oneDNN's 1x1 kernel takes only inputs of twice the output's size; an odd one (7x7 -> 4x4,
  // ResNet-18's last projection at 28x28 inputs) falls to its generic direct kernel at 15-20% of
  // the f32 peak.
  return k == 1 && (x.dim(2) != 2 * y.dim(2) || x.dim(3) != 2 * y.dim(3));
}

int64_t setChunkFloats(int64_t floats) {
  if (floats < 1) throw Error("strided-convolution chunks need at least one float, got " + std::to_string(floats));
  return chunkFloats.exchange(floats);
}

void forward(KernelCall& call) {
  const TensorView &x = call.in[0], &w = call.in[1], &y = call.out[0];
  const Shape s = shapeOf(x, y, w);
  const int64_t K = s.columns();
  auto& [chunks, gemms, unused] = cachedState<State>(call, [&] {
    Chunks c(s);
    return State{c, sliced::Gemm(rowMajor(c.rows, K), transposed(K, s.O), rowMajor(c.rows, s.O)), {}};
  });
  float *col = threadScratch(0, chunks.rows * K), *mat = threadScratch(1, chunks.rows * s.O),
        *wt = threadScratch(2, s.O * K);
  const float* bias = call.in.size() > 2 ? call.in[2].as<const float>() : nullptr;
  const float* in = x.as<const float>();
  float* out = y.as<float>();
  tapsMajor(w.as<const float>(), s.O, s.C, s.taps(), wt);
  for (int64_t i = 0; i < chunks.count; ++i) {
    const int64_t n0 = i * chunks.images;
    overBlockRows(
        s.B, chunks.rows, kGrain, [&](int64_t a, int64_t b) { windowRows<8>(in, s, n0, a, b, col); },
        [&](int64_t a, int64_t b) { windowRows<16>(in, s, n0, a, b, col); });
    gemms.run({{DNNL_ARG_SRC, col}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, mat}});
    overBlockRows(
        s.B, chunks.rows, kGrain, [&](int64_t a, int64_t b) { scatterRows<8>(mat, bias, s, n0, a, b, out); },
        [&](int64_t a, int64_t b) { scatterRows<16>(mat, bias, s, n0, a, b, out); });
  }
}

void backwardData(KernelCall& call) {
  const TensorView &dy = call.in[0], &w = call.in[1], &dx = call.out[0];
  const Shape s = shapeOf(dx, dy, w);
  const int64_t K = s.columns();
  auto& [chunks, gemms, unused] = cachedState<State>(call, [&] {
    Chunks c(s);
    return State{c, sliced::Gemm(rowMajor(c.rows, s.O), rowMajor(s.O, K), rowMajor(c.rows, K)), {}};
  });
  float *col = threadScratch(0, chunks.rows * K), *mat = threadScratch(1, chunks.rows * s.O),
        *wt = threadScratch(2, s.O * K);
  const float* in = dy.as<const float>();
  float* out = dx.as<float>();
  tapsMajor(w.as<const float>(), s.O, s.C, s.taps(), wt);
  for (int64_t i = 0; i < chunks.count; ++i) {
    const int64_t n0 = i * chunks.images;
    overBlockRows(
        s.B, chunks.rows, kGrain, [&](int64_t a, int64_t b) { gatherRows<8>(in, s, n0, a, b, mat); },
        [&](int64_t a, int64_t b) { gatherRows<16>(in, s, n0, a, b, mat); });
    gemms.run({{DNNL_ARG_SRC, mat}, {DNNL_ARG_WEIGHTS, wt}, {DNNL_ARG_DST, col}});
    overBlockRows(
        s.B, chunks.images, 1, [&](int64_t a, int64_t) { addWindows<8>(col, s, n0, a, out); },
        [&](int64_t a, int64_t) { addWindows<16>(col, s, n0, a, out); });
  }
}

void backwardFilter(KernelCall& call) {
  const TensorView &x = call.in[0], &dy = call.in[1], &dw = call.out[0];
  const Shape s = shapeOf(x, dy, dw);
  const int64_t K = s.columns();
  auto& [chunks, first, rest] = cachedState<State>(call, [&] {
    Chunks c(s);
    // dWt^T = col^T dY, its K = taps x C rows in slices: each slice's GEMM reads dY's chunk
    // (rows x O) again, where slices of O's rows (dWt = dY^T col) read the wider col again
    // (Zen 4, backward filter alone: stage 2.0.conv1 31-35 -> 15-18 ms, stage 3.0.conv1 16-19 -> 13).
    return State{c, sliced::Gemm(transposed(K, c.rows), rowMajor(c.rows, s.O), rowMajor(K, s.O)),
                 sliced::Gemm(transposed(K, c.rows), rowMajor(c.rows, s.O), rowMajor(K, s.O), true)};
  });
  float *col = threadScratch(0, chunks.rows * K), *mat = threadScratch(1, chunks.rows * s.O),
        *wt = threadScratch(2, s.O * K);
  const float *in = x.as<const float>(), *grad = dy.as<const float>();
  for (int64_t i = 0; i < chunks.count; ++i) {
    const int64_t n0 = i * chunks.images;
    overBlockRows(
        s.B, chunks.rows, kGrain,
        [&](int64_t a, int64_t b) {
          windowRows<8>(in, s, n0, a, b, col);
          gatherRows<8>(grad, s, n0, a, b, mat);
        },
        [&](int64_t a, int64_t b) {
          windowRows<16>(in, s, n0, a, b, col);
          gatherRows<16>(grad, s, n0, a, b, mat);
        });
    (i == 0 ? first : rest).run({{DNNL_ARG_SRC, col}, {DNNL_ARG_WEIGHTS, mat}, {DNNL_ARG_DST, wt}});
  }
  channelsMajorFromColumns(wt, s.O, s.C, s.taps(), dw.as<float>());
}

}  // namespace spmd::runtime::cpu::strided
