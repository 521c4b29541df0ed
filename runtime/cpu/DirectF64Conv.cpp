// f64 convolutions as direct loops in the reference loops' summation order (DirectF64Conv.h).
// One operand is copied with its channels innermost in blocks of L lanes (the ISA's doubles a
// register: 8, 4 or 2; a short last block padded with zeros whose lanes are dropped), so that a
// broadcast of the other operand times one vector adds into L outputs at once. J outputs along a
// row (or taps along a filter row) are held in registers together to reuse each load.
#include "runtime/cpu/DirectF64Conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu::direct_f64 {
namespace {

constexpr int kRow = 4;  // outputs of one row (forward, backward data) held in registers at once
constexpr int kTaps = 8;  // filter taps of one row (backward filter) held in registers at once

struct Geometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw;
  int64_t taps() const { return kh * kw; }
};

Geometry geometryOf(const Step& step, const TensorView& x, const TensorView& filter, const TensorView& y) {
  const ConvView attrs = convAttrs(step);
  return {x.dim(0),         x.dim(1),         x.dim(2),          x.dim(3),          filter.dim(0),
          filter.dim(2),    filter.dim(3),    y.dim(2),          y.dim(3),          attrs.stride[0],
          attrs.stride[1],  attrs.padding[0], attrs.padding[1]};
}

int64_t floorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

// The ISA chosen once per call: the lane count of the copied operands is its register width.
int lanesOf(OwnIsa isa) { return isa == OwnIsa::avx512 ? 8 : isa == OwnIsa::avx2 ? 4 : 2; }

// t[((block * outer + k) * inner + t) * L + l] = src[((block * L + l) * outer + k) * inner + t],
// or 0 where block * L + l >= rows: `rows` rows of `outer * inner` values, lanes over rows.
// With `swap`, src is [outer][rows][inner] instead (the filter read by input channel).
std::vector<double> lanesOver(const double* src, int64_t rows, int64_t outer, int64_t inner, int L, bool swap) {
  const int64_t blocks = (rows + L - 1) / L;
  std::vector<double> out(size_t(blocks * outer * inner * L), 0.0);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t k = 0; k < outer; ++k)
      for (int l = 0; l < L && block * L + l < rows; ++l) {
        const int64_t row = block * L + l;
        const double* from = swap ? src + (k * rows + row) * inner : src + (row * outer + k) * inner;
        double* to = out.data() + (block * outer + k) * inner * L + l;
        for (int64_t t = 0; t < inner; ++t) to[t * L] = from[t];
      }
  return out;
}

// y[b][f0 + l][i][j] for the lanes' output channels: bias, then x * filter over (ch, u, v).
template <int L>
SPMD_ISA_BODY void forwardBlock(const double* x, const double* filter, const double* bias, const Geometry& g,
                                int64_t b, int64_t f0, bool relu, double* y) {
  typedef double V __attribute__((vector_size(L * sizeof(double))));
  const int lanes = int(std::min<int64_t>(L, g.o - f0));
  V start = {};
  if (bias) std::memcpy(&start, bias, sizeof start);
  for (int64_t i = 0; i < g.oh; ++i)
    for (int64_t j0 = 0; j0 < g.ow; j0 += kRow) {
      const int nj = int(std::min<int64_t>(kRow, g.ow - j0));
      const int64_t s0 = j0 * g.sw - g.pw;
      const bool inside = nj == kRow && s0 >= 0 && s0 + (kRow - 1) * g.sw + g.kw - 1 < g.w;
      V acc[kRow];
      for (int jj = 0; jj < kRow; ++jj) acc[jj] = start;
      for (int64_t ch = 0; ch < g.c; ++ch)
        for (int64_t u = 0; u < g.kh; ++u) {
          const int64_t r = i * g.sh - g.ph + u;
          if (r < 0 || r >= g.h) continue;
          const double* row = x + ((b * g.c + ch) * g.h + r) * g.w;
          const double* taps = filter + (ch * g.kh + u) * g.kw * L;
          for (int64_t v = 0; v < g.kw; ++v) {
            V wv;
            std::memcpy(&wv, taps + v * L, sizeof wv);
            if (inside) {
              for (int jj = 0; jj < kRow; ++jj) acc[jj] += row[s0 + jj * g.sw + v] * wv;
            } else {
              for (int jj = 0; jj < nj; ++jj) {
                const int64_t s = s0 + jj * g.sw + v;
                if (s >= 0 && s < g.w) acc[jj] += row[s] * wv;
              }
            }
          }
        }
      for (int jj = 0; jj < nj; ++jj) {
        double values[L];
        std::memcpy(values, &acc[jj], sizeof values);  // (GCC 12 reads no lane of a dependent vector type)
        for (int l = 0; l < lanes; ++l)
          y[((b * g.o + f0 + l) * g.oh + i) * g.ow + j0 + jj] = relu ? reluOf(values[l]) : values[l];
      }
    }
}

// dx[b][c0 + l][r][s]: 0, then dy * filter over the output channels, then the rows i, then the
// columns j whose window holds (r, s).
template <int L>
SPMD_ISA_BODY void backwardDataBlock(const double* dy, const double* filter, const Geometry& g, int64_t b,
                                     int64_t c0, double* dx) {
  typedef double V __attribute__((vector_size(L * sizeof(double))));
  const int lanes = int(std::min<int64_t>(L, g.c - c0));
  for (int64_t r = 0; r < g.h; ++r) {
    const int64_t iLo = std::max<int64_t>(0, ceilDiv(r + g.ph - g.kh + 1, g.sh));
    const int64_t iHi = std::min<int64_t>(g.oh - 1, floorDiv(r + g.ph, g.sh));
    for (int64_t s0 = 0; s0 < g.w; s0 += kRow) {
      const int ns = int(std::min<int64_t>(kRow, g.w - s0));
      int64_t jLo[kRow], jHi[kRow];
      for (int jj = 0; jj < ns; ++jj) {
        jLo[jj] = std::max<int64_t>(0, ceilDiv(s0 + jj + g.pw - g.kw + 1, g.sw));
        jHi[jj] = std::min<int64_t>(g.ow - 1, floorDiv(s0 + jj + g.pw, g.sw));
      }
      V acc[kRow] = {};
      for (int64_t f = 0; f < g.o; ++f)
        for (int64_t i = iLo; i <= iHi; ++i) {
          const int64_t u = r + g.ph - i * g.sh;
          const double* row = dy + ((b * g.o + f) * g.oh + i) * g.ow;
          const double* taps = filter + (f * g.kh + u) * g.kw * L;
          for (int jj = 0; jj < ns; ++jj)
            for (int64_t j = jLo[jj]; j <= jHi[jj]; ++j) {
              V wv;
              std::memcpy(&wv, taps + (s0 + jj + g.pw - j * g.sw) * L, sizeof wv);
              acc[jj] += row[j] * wv;
            }
        }
      for (int jj = 0; jj < ns; ++jj) {
        double values[L];
        std::memcpy(values, &acc[jj], sizeof values);
        for (int l = 0; l < lanes; ++l) dx[((b * g.c + c0 + l) * g.h + r) * g.w + s0 + jj] = values[l];
      }
    }
  }
}

// dw[f][c0 + l][u][v]: 0, then dy * x over the images, then the rows i, then the columns j whose
// tap (u, v) lies inside the image. x is [c blocks][n][h][w][L].
template <int L>
SPMD_ISA_BODY void backwardFilterBlock(const double* x, const double* dy, const Geometry& g, int64_t f,
                                       int64_t c0, double* dw) {
  typedef double V __attribute__((vector_size(L * sizeof(double))));
  const int lanes = int(std::min<int64_t>(L, g.c - c0));
  for (int64_t u = 0; u < g.kh; ++u)
    for (int64_t v0 = 0; v0 < g.kw; v0 += kTaps) {
      const int nv = int(std::min<int64_t>(kTaps, g.kw - v0));
      V acc[kTaps] = {};
      for (int64_t b = 0; b < g.n; ++b)
        for (int64_t i = 0; i < g.oh; ++i) {
          const int64_t r = i * g.sh - g.ph + u;
          if (r < 0 || r >= g.h) continue;
          const double* grad = dy + ((b * g.o + f) * g.oh + i) * g.ow;
          const double* row = x + (b * g.h + r) * g.w * L;
          for (int64_t j = 0; j < g.ow; ++j) {
            const double d = grad[j];
            const int64_t s0 = j * g.sw - g.pw + v0;
            if (nv == kTaps && s0 >= 0 && s0 + kTaps - 1 < g.w) {
              for (int t = 0; t < kTaps; ++t) {
                V xv;
                std::memcpy(&xv, row + (s0 + t) * L, sizeof xv);
                acc[t] += d * xv;
              }
            } else {
              for (int t = 0; t < nv; ++t) {
                if (s0 + t < 0 || s0 + t >= g.w) continue;
                V xv;
                std::memcpy(&xv, row + (s0 + t) * L, sizeof xv);
                acc[t] += d * xv;
              }
            }
          }
        }
      for (int t = 0; t < nv; ++t) {
        double values[L];
        std::memcpy(values, &acc[t], sizeof values);
        for (int l = 0; l < lanes; ++l) dw[((f * g.c + c0 + l) * g.kh + u) * g.kw + v0 + t] = values[l];
      }
    }
}

template <int L>
SPMD_ISA_BODY void forwardBody(const double* x, const double* filter, const double* bias, const Geometry& g, int64_t b,
                               int64_t block, bool relu, double* y) {
  forwardBlock<L>(x, filter + block * g.c * g.taps() * L, bias ? bias + block * L : nullptr, g, b, block * L, relu, y);
}

template <int L>
SPMD_ISA_BODY void backwardDataBody(const double* dy, const double* filter, const Geometry& g, int64_t b, int64_t block,
                                    double* dx) {
  backwardDataBlock<L>(dy, filter + block * g.o * g.taps() * L, g, b, block * L, dx);
}

template <int L>
SPMD_ISA_BODY void backwardFilterBody(const double* x, const double* dy, const Geometry& g, int64_t f, int64_t block,
                                      double* dw) {
  backwardFilterBlock<L>(x + block * g.n * g.h * g.w * L, dy, g, f, block * L, dw);
}

bool plain4d(const TensorView& t) { return t.dtype == DType::f64 && t.rank() == 4 && t.layout.empty(); }

}  // namespace

bool runs(const KernelCall& call) {
  if (call.in.size() < 2 || call.out.size() != 1 || !plain4d(call.in[0]) || !plain4d(call.in[1]) ||
      !plain4d(call.out[0]))
    return false;
  const ConvView attrs = convAttrs(call.step);
  return attrs.stride.size() == 2 && attrs.padding.size() == 2 && attrs.stride[0] > 0 && attrs.stride[1] > 0;
}

void forward(KernelCall& call) {
  const TensorView &x = call.in[0], &filter = call.in[1], &y = call.out[0];
  const Geometry g = geometryOf(call.step, x, filter, y);
  const OwnIsa isa = ownIsa();
  const int L = lanesOf(isa);
  const std::vector<double> taps = lanesOver(filter.as<const double>(), g.o, g.c, g.taps(), L, false);
  std::vector<double> bias;
  if (call.in.size() > 2) bias = lanesOver(call.in[2].as<const double>(), g.o, 1, 1, L, false);
  const int64_t blocks = (g.o + L - 1) / L;
  const bool relu = convAttrs(call.step).relu;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t block = 0; block < blocks; ++block)
      onIsaEach<forwardBody<8>, forwardBody<4>, forwardBody<2>>(isa, x.as<const double>(), taps.data(),
                                                            bias.empty() ? nullptr : bias.data(), g, b, block, relu,
                                                            y.as<double>());
}

void backwardData(KernelCall& call) {
  const TensorView &dy = call.in[0], &filter = call.in[1], &dx = call.out[0];
  const Geometry g = geometryOf(call.step, dx, filter, dy);
  const OwnIsa isa = ownIsa();
  const int L = lanesOf(isa);
  const std::vector<double> taps = lanesOver(filter.as<const double>(), g.c, g.o, g.taps(), L, true);
  const int64_t blocks = (g.c + L - 1) / L;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t block = 0; block < blocks; ++block)
      onIsaEach<backwardDataBody<8>, backwardDataBody<4>, backwardDataBody<2>>(isa, dy.as<const double>(), taps.data(), g,
                                                                           b, block, dx.as<double>());
}

void backwardFilter(KernelCall& call) {
  const TensorView &x = call.in[0], &dy = call.in[1], &dw = call.out[0];
  const Geometry g = geometryOf(call.step, x, dw, dy);
  const OwnIsa isa = ownIsa();
  const int L = lanesOf(isa);
  const std::vector<double> image = lanesOver(x.as<const double>(), g.c, g.n, g.h * g.w, L, true);
  const int64_t blocks = (g.c + L - 1) / L;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t f = 0; f < g.o; ++f)
    for (int64_t block = 0; block < blocks; ++block)
      onIsaEach<backwardFilterBody<8>, backwardFilterBody<4>, backwardFilterBody<2>>(isa, image.data(), dy.as<const double>(),
                                                                                 g, f, block, dw.as<double>());
}

}  // namespace spmd::runtime::cpu::direct_f64
