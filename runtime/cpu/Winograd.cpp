// Winograd F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks",
// 2016) on nChw<B>c activations. With 2x2 output tiles, T = N * ceil(H/2) * ceil(W/2) tiles:
//   forward:         U[a][c][k] = (G w[k][c] G^T)[a],  V[a][t][c] = (B^T x_t B)[a],
//                    M[a] = V[a] U[a] (16 GEMMs, tiles x C x K),  y_t = A^T M_t A + bias
//   backward data:   the same with dy for x and the filter transposed and turned 180 degrees
//                    (a stride-1, padding-1 3x3 convolution's input gradient is one too)
//   backward filter: Z[a][t][k] = (A dy_t A^T)[a],  dU[a] = V[a]^T Z[a] (16 GEMMs, C x tiles x K),
//                    dw[k][c] = G^T dU[.][c][k] G
// with B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1],
// A^T = [1 1 1 0; 0 1 -1 -1]. Input tiles start one row and column before the output tile
// (the padding) and read zeros outside the image; output tiles past an odd edge are dropped
// (forward) or read as zero gradients (backward filter). The transforms only add, subtract and
// halve, so the f32 error stays at the direct kernels' level (tests/unit/KernelCases.h: 1.4e-6 to
// 2.2e-6 where oneDNN's direct kernels give 1.4e-6 to 5.7e-6). Tiles go through in chunks (see
// Chunks); the transforms run on the OpenMP pool, one tile per iteration, B channels a vector;
// the buffers are per-thread scratch reused across calls.
#include "runtime/cpu/Winograd.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/base/Parse.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime::cpu::winograd {
namespace {

constexpr int64_t kMaxBlock = 16;

// An [N, C, H, W] tensor in nChw<B>c and its tiling.
struct Tiled {
  const TensorView& v;
  int64_t N, C, H, W, B, th, tw;
  explicit Tiled(const TensorView& view)
      : v(view), N(view.dim(0)), C(view.dim(1)), H(view.dim(2)), W(view.dim(3)),
        B(channelBlock(view.layout)), th((H + 1) / 2), tw((W + 1) / 2) {}
  int64_t tiles() const { return N * th * tw; }
  int64_t offset(int64_t n, int64_t cb, int64_t h, int64_t w) const {
    return (((n * (C / B) + cb) * H + h) * W + w) * B;
  }
};

// Per-thread scratch (each device runs its steps on one thread; the transforms' OpenMP teams
// share the caller's buffers).
float* scratch(int which, int64_t elements) {
  thread_local std::vector<float> buffers[3];
  auto& b = buffers[which];
  if (static_cast<int64_t>(b.size()) < elements) b.resize(static_cast<size_t>(elements));
  return b.data();
}

// V[a][r][c] = (B^T d B)[a] for the 4x4 input tiles d of tiles t0 + r, r < rows, of `x` (zero
// outside the image and for tiles past the last).
void inputTransform(const Tiled& x, int64_t t0, int64_t rows, float* V) {
  const int64_t T = x.tiles(), C = x.C, B = x.B, CB = C / B;
  const float* data = x.v.as<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = std::min(t0 + r, T - 1), n = t / (x.th * x.tw), h0 = 2 * ((t / x.tw) % x.th) - 1, w0 = 2 * (t % x.tw) - 1;
    for (int64_t cb = 0; cb < CB; ++cb) {
      float d[4][4][kMaxBlock], e[4][4][kMaxBlock];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          if (t0 + r >= T || h < 0 || h >= x.H || w < 0 || w >= x.W)
            std::memset(d[i][j], 0, sizeof(float) * B);
          else std::memcpy(d[i][j], data + x.offset(n, cb, h, w), sizeof(float) * B);
        }
      for (int j = 0; j < 4; ++j)
        for (int64_t l = 0; l < B; ++l) {
          e[0][j][l] = d[0][j][l] - d[2][j][l];
          e[1][j][l] = d[1][j][l] + d[2][j][l];
          e[2][j][l] = d[2][j][l] - d[1][j][l];
          e[3][j][l] = d[1][j][l] - d[3][j][l];
        }
      float* out = V + r * C + cb * B;
      const int64_t stride = rows * C;
      for (int i = 0; i < 4; ++i)
        for (int64_t l = 0; l < B; ++l) {
          out[(i * 4 + 0) * stride + l] = e[i][0][l] - e[i][2][l];
          out[(i * 4 + 1) * stride + l] = e[i][1][l] + e[i][2][l];
          out[(i * 4 + 2) * stride + l] = e[i][2][l] - e[i][1][l];
          out[(i * 4 + 3) * stride + l] = e[i][1][l] - e[i][3][l];
        }
    }
  }
}

// y_t = A^T M_r A (+ bias) for tiles t = t0 + r, r < rows (those that exist), written into `y`
// (nChw<B>c, K channels).
void outputTransform(const float* M, int64_t t0, int64_t rows, const float* bias, const Tiled& y) {
  const int64_t K = y.C, B = y.B, KB = K / B, valid = std::min(rows, y.tiles() - t0);
  float* data = y.v.as<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < valid; ++r) {
    const int64_t t = t0 + r, n = t / (y.th * y.tw), h0 = 2 * ((t / y.tw) % y.th), w0 = 2 * (t % y.tw);
    for (int64_t kb = 0; kb < KB; ++kb) {
      const float* in = M + r * K + kb * B;
      const int64_t stride = rows * K;
      float e[2][4][kMaxBlock];
      for (int j = 0; j < 4; ++j)
        for (int64_t l = 0; l < B; ++l) {
          float m0 = in[(0 + j) * stride + l], m1 = in[(4 + j) * stride + l],
                m2 = in[(8 + j) * stride + l], m3 = in[(12 + j) * stride + l];
          e[0][j][l] = m0 + m1 + m2;
          e[1][j][l] = m1 - m2 - m3;
        }
      for (int i = 0; i < 2; ++i) {
        const int64_t h = h0 + i;
        if (h >= y.H) continue;
        for (int j = 0; j < 2; ++j) {
          const int64_t w = w0 + j;
          if (w >= y.W) continue;
          float* out = data + y.offset(n, kb, h, w);
          for (int64_t l = 0; l < B; ++l) {
            float v = j == 0 ? e[i][0][l] + e[i][1][l] + e[i][2][l] : e[i][1][l] - e[i][2][l] - e[i][3][l];
            out[l] = bias ? v + bias[kb * B + l] : v;
          }
        }
      }
    }
  }
}

// Filters go through the transforms kLanes at a time, one per lane, so the loops vectorize.
constexpr int64_t kLanes = 8;  // divides K and C: both are multiples of the channel block

// u[a * stride + l] = (G g_l G^T)[a] for the kLanes 3x3 filters g[.][l] (row-major taps).
inline void filterTiles(const float (&g)[9][kLanes], float* u, int64_t stride) {
  float r[4][3][kLanes];
  for (int j = 0; j < 3; ++j)
    for (int64_t l = 0; l < kLanes; ++l) {
      r[0][j][l] = g[j][l];
      r[1][j][l] = 0.5f * (g[j][l] + g[3 + j][l] + g[6 + j][l]);
      r[2][j][l] = 0.5f * (g[j][l] - g[3 + j][l] + g[6 + j][l]);
      r[3][j][l] = g[6 + j][l];
    }
  for (int i = 0; i < 4; ++i) {
    float* row = u + i * 4 * stride;
    for (int64_t l = 0; l < kLanes; ++l) {
      row[l] = r[i][0][l];
      row[stride + l] = 0.5f * (r[i][0][l] + r[i][1][l] + r[i][2][l]);
      row[2 * stride + l] = 0.5f * (r[i][0][l] - r[i][1][l] + r[i][2][l]);
      row[3 * stride + l] = r[i][2][l];
    }
  }
}

// Forward: U[a][c][k] from w[k][c] (OIHW). Backward data: U[a][k][c] from w[k][c] turned 180
// degrees (the input gradient convolves dy, K channels in, with the transposed filter).
void filterTransform(const float* w, int64_t K, int64_t C, bool backwardData, float* U) {
  const int64_t stride = K * C;
  if (!backwardData) {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k0 = 0; k0 < K; k0 += kLanes) {
        float g[9][kLanes];
        for (int64_t l = 0; l < kLanes; ++l)
          for (int i = 0; i < 9; ++i) g[i][l] = w[((k0 + l) * C + c) * 9 + i];
        filterTiles(g, U + c * K + k0, stride);
      }
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c0 = 0; c0 < C; c0 += kLanes) {
      float g[9][kLanes];
      for (int64_t l = 0; l < kLanes; ++l)
        for (int i = 0; i < 9; ++i) g[i][l] = w[(k * C + c0 + l) * 9 + 8 - i];
      filterTiles(g, U + k * C + c0, stride);
    }
}

// Z[a][r][k] = (A dy_t A^T)[a] for the 2x2 tiles t = t0 + r, r < rows, of `dy` (zero past an
// odd edge and for tiles past the last).
void gradientTransform(const Tiled& dy, int64_t t0, int64_t rows, float* Z) {
  const int64_t T = dy.tiles(), K = dy.C, B = dy.B, KB = K / B;
  const float* data = dy.v.as<const float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = std::min(t0 + r, T - 1), n = t / (dy.th * dy.tw), h0 = 2 * ((t / dy.tw) % dy.th), w0 = 2 * (t % dy.tw);
    for (int64_t kb = 0; kb < KB; ++kb) {
      float g[2][2][kMaxBlock], e[4][2][kMaxBlock];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          if (t0 + r >= T || h >= dy.H || w >= dy.W) std::memset(g[i][j], 0, sizeof(float) * B);
          else std::memcpy(g[i][j], data + dy.offset(n, kb, h, w), sizeof(float) * B);
        }
      for (int j = 0; j < 2; ++j)
        for (int64_t l = 0; l < B; ++l) {
          e[0][j][l] = g[0][j][l];
          e[1][j][l] = g[0][j][l] + g[1][j][l];
          e[2][j][l] = g[0][j][l] - g[1][j][l];
          e[3][j][l] = -g[1][j][l];
        }
      float* out = Z + r * K + kb * B;
      const int64_t stride = rows * K;
      for (int i = 0; i < 4; ++i)
        for (int64_t l = 0; l < B; ++l) {
          out[(i * 4 + 0) * stride + l] = e[i][0][l];
          out[(i * 4 + 1) * stride + l] = e[i][0][l] + e[i][1][l];
          out[(i * 4 + 2) * stride + l] = e[i][0][l] - e[i][1][l];
          out[(i * 4 + 3) * stride + l] = -e[i][1][l];
        }
    }
  }
}

// dw[k][c] = G^T dU[.][c][k] G (OIHW).
void filterGradientTransform(const float* dU, int64_t C, int64_t K, float* dw) {
  const int64_t stride = C * K;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < C; ++c)
    for (int64_t k0 = 0; k0 < K; k0 += kLanes) {
      const float* p = dU + c * K + k0;
      float q[3][4][kLanes], out[9][kLanes];
      for (int j = 0; j < 4; ++j)
        for (int64_t l = 0; l < kLanes; ++l) {
          float p0 = p[j * stride + l], p1 = p[(4 + j) * stride + l], p2 = p[(8 + j) * stride + l],
                p3 = p[(12 + j) * stride + l];
          q[0][j][l] = p0 + 0.5f * (p1 + p2);
          q[1][j][l] = 0.5f * (p1 - p2);
          q[2][j][l] = 0.5f * (p1 + p2) + p3;
        }
      for (int i = 0; i < 3; ++i)
        for (int64_t l = 0; l < kLanes; ++l) {
          out[i * 3 + 0][l] = q[i][0][l] + 0.5f * (q[i][1][l] + q[i][2][l]);
          out[i * 3 + 1][l] = 0.5f * (q[i][1][l] - q[i][2][l]);
          out[i * 3 + 2][l] = 0.5f * (q[i][1][l] + q[i][2][l]) + q[i][3][l];
        }
      for (int64_t l = 0; l < kLanes; ++l)
        for (int i = 0; i < 9; ++i) dw[((k0 + l) * C + c) * 9 + i] = out[i][l];
    }
}

// The 16 GEMMs dst[a] = src[a] x weights[a] as one batched oneDNN matmul: src [16, M, R] (or its
// transpose, stored [16, R, M], when `transposedSrc`), weights [16, R, Nc], dst [16, M, Nc], all
// row-major; `accumulate`: dst += instead of =.
Prepared batchedGemms(int64_t M, int64_t R, int64_t Nc, bool transposedSrc, bool accumulate = false) {
  using namespace dnnl;
  using dims = memory::dims;
  memory::desc a = transposedSrc
                       ? memory::desc(dims{16, M, R}, memory::data_type::f32, dims{R * M, 1, M})
                       : memory::desc(dims{16, M, R}, memory::data_type::f32, memory::format_tag::abc);
  memory::desc b(dims{16, R, Nc}, memory::data_type::f32, memory::format_tag::abc);
  memory::desc c(dims{16, M, Nc}, memory::data_type::f32, memory::format_tag::abc);
  primitive_attr attr;
  if (accumulate) {
    post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  Prepared p{dnnl::matmul(matmul::primitive_desc(matmul::desc(a, b, c), attr, engine())),
             stream(engine()), {}};
  p.bind(DNNL_ARG_SRC, a);
  p.bind(DNNL_ARG_WEIGHTS, b);
  p.bind(DNNL_ARG_DST, c);
  return p;
}

void runGemms(Prepared& gemms, const float* a, const float* b, float* c) {
  gemms.run({{DNNL_ARG_SRC, const_cast<float*>(a)}, {DNNL_ARG_WEIGHTS, const_cast<float*>(b)},
             {DNNL_ARG_DST, c}});
}

bool enabled() {
  static const bool on = [] {
    return envSwitch("SPMD_WINOGRAD").value_or(true);
  }();
  return on;
}

// Tiles go through the transforms and GEMMs in chunks of `rows`, so the transformed tiles (16 x
// rows x channels floats, at most chunkFloats) stay in cache between a transform and its GEMM
// and the scratch does not grow with the batch. Chunks are equal; the last one's rows past the
// last tile are zeros.
std::atomic<int64_t> chunkFloats{int64_t{1} << 20};  // 4 MB

struct Chunks {
  int64_t rows, count;
  Chunks(int64_t tiles, int64_t channels) {
    const int64_t most = std::max<int64_t>(1, chunkFloats.load() / (16 * channels));
    count = (tiles + most - 1) / most;
    rows = (tiles + count - 1) / count;
  }
};

// The chunking is fixed when a step's kernel is prepared, with the GEMMs of that many rows.
struct ConvolveState {
  Chunks chunks;
  Prepared gemms;
};

// Forward and backward data: `in` (C channels) convolved with the filter transform U into
// `out` (K channels).
void convolve(KernelCall& call, const TensorView& in, const TensorView& out, bool backwardData,
              const float* bias) {
  Tiled x(in), y(out);
  const int64_t C = x.C, K = y.C;
  auto& [chunks, gemms] = cachedState<ConvolveState>(call, [&] {
    Chunks c(x.tiles(), std::max(C, K));
    return ConvolveState{c, batchedGemms(c.rows, C, K, false)};
  });
  float *V = scratch(0, 16 * chunks.rows * C), *U = scratch(1, 16 * C * K),
        *M = scratch(2, 16 * chunks.rows * K);
  const TensorView& w = call.in[1];  // OIHW of the forward convolution
  filterTransform(w.as<const float>(), w.dim(0), w.dim(1), backwardData, U);
  for (int64_t i = 0; i < chunks.count; ++i) {
    inputTransform(x, i * chunks.rows, chunks.rows, V);
    runGemms(gemms, V, U, M);
    outputTransform(M, i * chunks.rows, chunks.rows, bias, y);
  }
}

// Backward filter: the first chunk's GEMMs write dU, the others add to it.
struct FilterState {
  Chunks chunks;
  Prepared first, rest;
};

}  // namespace

bool applies(const KernelCall& call) {
  if (!enabled() || call.in.size() < 2 || call.out.empty()) return false;
  const TensorView& a = call.in[0];
  const std::string& op = call.step.op;
  // The two activations (x and y, dy and dx, x and dy) and the filter.
  const TensorView& other = op == "conv2d_backward_filter" ? call.in[1] : call.out[0];
  const TensorView& w = op == "conv2d_backward_filter" ? call.out[0] : call.in[1];
  if (a.dtype != DType::f32 || a.rank() != 4 || other.rank() != 4 || w.rank() != 4) return false;
  if (a.layout.empty() || a.layout != other.layout) return false;
  const int64_t block = channelBlock(a.layout);
  if (block > kMaxBlock || a.dim(1) % block || other.dim(1) % block) return false;
  if (w.dim(2) != 3 || w.dim(3) != 3 || w.dim(0) < 128 || w.dim(1) < 128) return false;
  const auto& stride = call.step.ints("stride");
  const auto& padding = call.step.ints("padding");
  return stride.size() == 2 && stride[0] == 1 && stride[1] == 1 && padding.size() == 2 &&
         padding[0] == 1 && padding[1] == 1 && a.dim(2) == other.dim(2) && a.dim(3) == other.dim(3);
}

int64_t setChunkFloats(int64_t floats) {
  if (floats < 1) throw Error("Winograd chunks need at least one float, got " + std::to_string(floats));
  return chunkFloats.exchange(floats);
}

void forward(KernelCall& call) {
  convolve(call, call.in[0], call.out[0], false, call.in.size() > 2 ? call.in[2].as<const float>() : nullptr);
}

void backwardData(KernelCall& call) { convolve(call, call.in[0], call.out[0], true, nullptr); }

void backwardFilter(KernelCall& call) {
  Tiled x(call.in[0]), dy(call.in[1]);
  const int64_t C = x.C, K = dy.C;
  auto& [chunks, first, rest] = cachedState<FilterState>(call, [&] {
    Chunks c(x.tiles(), std::max(C, K));
    return FilterState{c, batchedGemms(C, c.rows, K, true), batchedGemms(C, c.rows, K, true, true)};
  });
  float *V = scratch(0, 16 * chunks.rows * C), *Z = scratch(1, 16 * chunks.rows * K),
        *dU = scratch(2, 16 * C * K);
  for (int64_t i = 0; i < chunks.count; ++i) {
    inputTransform(x, i * chunks.rows, chunks.rows, V);
    gradientTransform(dy, i * chunks.rows, chunks.rows, Z);
    runGemms(i == 0 ? first : rest, V, Z, dU);
  }
  filterGradientTransform(dU, C, K, call.out[0].as<float>());
}

}  // namespace spmd::runtime::cpu::winograd
