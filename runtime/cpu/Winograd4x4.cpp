// Winograd F(4x4, 3x3) (Lavin and Gray 2016) on nChw<B>c activations, the tiles in chunks
// through 36 one-thread oneDNN GEMMs (WinogradChunks.h). With 4x4 output tiles,
// T = N * ceil(H/4) * ceil(W/4) tiles and 36 planes:
//   forward:         U[a][c][k] = (G w[k][c] G^T)[a],  V[a][t][c] = (B^T x_t B)[a],
//                    M[a] = V[a] U[a] (36 GEMMs, tiles x C x K),  y_t = A^T M_t A + bias
//   backward data:   the same with dy for x and the filter transposed and turned 180 degrees
//   backward filter: Z[a][t][k] = (A dy_t A^T)[a],  dU[a] = V[a]^T Z[a] (36 GEMMs, C x tiles x K),
//                    dw[k][c] = G^T dU[.][c][k] G
// on the interpolation points 0, 1, -1, 1/2, -2 (and infinity), Toom-Cook's matrices
//   B^T = [1 -3/2 -2 3/2 1 0; 0 -1 1/2 5/2 1 0; 0 1 -5/2 1/2 1 0; 0 -2 -1 2 1 0;
//          0 1/2 -1 -1/2 1 0; 0 1 -3/2 -2 3/2 1],
//   G = [1 0 0; 1/3 1/3 1/3; -1/3 1/3 -1/3; -16/15 -8/15 -4/15; 1/15 -2/15 4/15; 0 0 1],
//   A^T = [1 1 1 1 1 0; 0 1 -1 1/2 -2 0; 0 1 1 1/4 4 0; 0 1 -1 1/8 -8 1].
// Input tiles (6x6) start one row and column before their output tile and read zeros outside
// the image; output tiles past an edge are cut (forward) or read as zero gradients (backward
// filter).
//
// 2.25 multiplies an output where F(2x2, 3x3) (runtime/cpu/Winograd.cpp) takes 4, on a quarter
// of its tiles (6x6 values for 16 outputs, not 4x4 for 4). The price is rounding: the f32 error
// is several times the direct kernels' (a float32 model of a 256-channel 8x8 layer, error over
// the output's RMS: max 1.4e-5, RMS 2.0e-6, where direct sums give about 2e-6 and 3e-7; the points
// 0, +-1, +-2 of the usual form gave 3.3e-5 and 3.2e-6). So the variant says so
// (KernelVariant::looseRounding) and SPMD_TIGHT_ROUNDING=1 leaves it out. Each transform is
// written once for a channel block of B lanes and compiled per ISA (OwnIsa.h; this file builds
// with -ffp-contract=off): the same bits on every ISA and thread count.
#include <algorithm>
#include <cstdint>
#include <utility>

#include <immintrin.h>

#include "runtime/cpu/BlockedLoops.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/cpu/WinogradChunks.h"
#include "runtime/cpu/WinogradLanes.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime::cpu::winograd {
namespace {

constexpr int64_t kPoints = 36;  // the transform's 6 x 6 points: the chunk's planes
constexpr int64_t kGrain = 4;    // tiles per OpenMP iteration of a transform

// An [N, C, H, W] tensor in nChw<B>c, cut into 4x4 tiles.
struct Tiling {
  int64_t N, C, H, W, B, th, tw, T;
  explicit Tiling(const TensorView& v)
      : N(v.dim(0)), C(v.dim(1)), H(v.dim(2)), W(v.dim(3)), B(channelBlock(v.layout)), th((H + 3) / 4),
        tw((W + 3) / 4), T(N * th * tw) {}
};

// The transforms' lines on vectors (WinogradLanes.h). The products by 1/2, 1/4, 1/8, 3/2 and
// 5/2 are exact, those by 1/3 and 1/15 round once more.
constexpr float kThird = 1.f / 3.f, kFifteenth = 1.f / 15.f;

// y = B^T d: 6 values to 6.
template <class V>
SPMD_ISA_BODY void inputLine(const V (&d)[6], V (&y)[6]) {
  const V e = d[4] - d[2], g = d[3] - d[1];
  y[0] = ((d[0] - d[2]) + 1.5f * g) + e;
  y[1] = ((d[4] - d[1]) + 0.5f * d[2]) + 2.5f * d[3];
  y[2] = ((d[4] + d[1]) - 2.5f * d[2]) + 0.5f * d[3];
  y[3] = e + 2.f * g;
  y[4] = e - 0.5f * g;
  y[5] = ((d[5] - d[3]) + 1.5f * e) - g;
}

// y = A^T m: 6 values to 4.
template <class V>
SPMD_ISA_BODY void outputLine(const V (&m)[6], V (&y)[4]) {
  const V p = m[1] + m[2], q = m[1] - m[2];
  y[0] = ((m[0] + p) + m[3]) + m[4];
  y[1] = (q + 0.5f * m[3]) - 2.f * m[4];
  y[2] = (p + 0.25f * m[3]) + 4.f * m[4];
  y[3] = ((q + 0.125f * m[3]) - 8.f * m[4]) + m[5];
}

// y = A z: 4 values to 6.
template <class V>
SPMD_ISA_BODY void gradientLine(const V (&z)[4], V (&y)[6]) {
  const V e = z[0] + z[2], f = z[1] + z[3];
  y[0] = z[0];
  y[1] = e + f;
  y[2] = e - f;
  y[3] = (z[0] + 0.25f * z[2]) + 0.5f * (z[1] + 0.25f * z[3]);
  y[4] = (z[0] + 4.f * z[2]) - 2.f * (z[1] + 4.f * z[3]);
  y[5] = z[3];
}

// y = G g: 3 values to 6.
template <class V>
SPMD_ISA_BODY void filterLine(const V (&g)[3], V (&y)[6]) {
  const V s = g[0] + g[2];
  y[0] = g[0];
  y[1] = kThird * (s + g[1]);
  y[2] = -kThird * (s - g[1]);
  y[3] = -kFifteenth * ((16.f * g[0] + 8.f * g[1]) + 4.f * g[2]);
  y[4] = kFifteenth * ((g[0] - 2.f * g[1]) + 4.f * g[2]);
  y[5] = g[2];
}

// y = G^T p: 6 values to 3.
template <class V>
SPMD_ISA_BODY void filterGradientLine(const V (&p)[6], V (&y)[3]) {
  y[0] = (p[0] + kThird * (p[1] - p[2])) - kFifteenth * (16.f * p[3] - p[4]);
  y[1] = kThird * (p[1] + p[2]) - kFifteenth * (8.f * p[3] + 2.f * p[4]);
  y[2] = (kThird * (p[1] - p[2]) - kFifteenth * (4.f * p[3] - 4.f * p[4])) + p[5];
}

// The tile t's image and its first output row and column.
struct Tile {
  int64_t n, h, w;
  Tile(const Tiling& g, int64_t t) : n(t / (g.th * g.tw)), h(4 * ((t / g.tw) % g.th)), w(4 * (t % g.tw)) {}
};

// V[a][r][c] = (B^T d B)[a] for the 6x6 input tiles d of tiles t0 + r, r in [r0, r1) (zeros
// outside the image and for tiles past the last), each a's rows `plane` floats apart.
template <int B>
SPMD_ISA_BODY void inputTiles(const float* __restrict data, const Tiling& g, int64_t t0, int64_t r0, int64_t r1,
                              int64_t plane, float* __restrict V) {
  using Vec = typename Lanes<B>::V;
  const int64_t CB = g.C / B, rowStride = g.W * B;
  // Tile t0 + r, and the next one (each divided out once); past the last tile, the last one's
  // place (read as zeros).
  Tile at(g, std::min(t0 + r0, g.T - 1));
  for (int64_t r = r0; r < r1; ++r) {
    const bool exists = t0 + r < g.T;
    const Tile next(g, std::min(t0 + r + 1, g.T - 1));
    const int64_t h0 = at.h - 1, w0 = at.w - 1;
    const bool inside = exists && h0 >= 0 && h0 + 6 <= g.H && w0 >= 0 && w0 + 6 <= g.W;
    // The next tile's columns past this one's, row by row: in a step the activations come from
    // memory, and the loads waited on them (the cpu:2 width-16 step, Zen 2: stage 1's forward
    // 11.1 -> 10.5 core-ms; its inputs alone, in cache, 3% slower).
    if (t0 + r + 1 < g.T) {
      for (int64_t cb = 0; cb < CB; ++cb) {
        const float* image = data + (next.n * CB + cb) * g.H * rowStride;
        const int64_t w = std::min(next.w + 4, g.W - 1) * B;
        for (int i = 0; i < 6; ++i) {
          const int64_t h = next.h - 1 + i;
          if (h >= 0 && h < g.H) __builtin_prefetch(image + h * rowStride + w);
        }
      }
    }
    for (int64_t cb = 0; cb < CB; ++cb) {
      const float* image = data + (at.n * CB + cb) * g.H * rowStride;
      Vec e[6][6];  // e[.][j] = B^T d[.][j], column by column
      for (int j = 0; j < 6; ++j) {
        Vec d[6], y[6];
        const int64_t w = w0 + j;
        for (int i = 0; i < 6; ++i) {
          const int64_t h = h0 + i;
          if (inside || (exists && h >= 0 && h < g.H && w >= 0 && w < g.W)) load(d[i], image + h * rowStride + w * B);
          else d[i] = Vec{};
        }
        inputLine(d, y);
        for (int i = 0; i < 6; ++i) e[i][j] = y[i];
      }
      float* out = V + r * g.C + cb * B;
      for (int i = 0; i < 6; ++i) {
        Vec y[6];
        inputLine(e[i], y);
        for (int k = 0; k < 6; ++k) store(out + (i * 6 + k) * plane, y[k]);
      }
    }
    at = next;
  }
}

// y_t = A^T M_r A (+ bias) for tiles t = t0 + r, r in [r0, r1) (those that exist), into the
// nChw<B>c tensor `data` (g.C channels), cut at the image's edges.
template <int B>
SPMD_ISA_BODY void outputTiles(const float* __restrict M, const Tiling& g, int64_t t0, int64_t r0, int64_t r1,
                               int64_t plane, const float* __restrict bias, float* __restrict data) {
  using Vec = typename Lanes<B>::V;
  const int64_t KB = g.C / B;
  for (int64_t r = r0; r < r1 && t0 + r < g.T; ++r) {
    const Tile at(g, t0 + r);
    for (int64_t kb = 0; kb < KB; ++kb) {
      const float* m = M + r * g.C + kb * B;
      Vec f[4][6];  // f[.][j] = A^T m[.][j]
      for (int j = 0; j < 6; ++j) {
        Vec column[6], y[4];
        for (int i = 0; i < 6; ++i) load(column[i], m + (i * 6 + j) * plane);
        outputLine(column, y);
        for (int i = 0; i < 4; ++i) f[i][j] = y[i];
      }
      Vec b{};
      if (bias) load(b, bias + kb * B);
      float* image = data + (at.n * KB + kb) * g.H * g.W * B;
      for (int i = 0; i < 4 && at.h + i < g.H; ++i) {
        Vec o[4];
        outputLine(f[i], o);
        for (int j = 0; j < 4 && at.w + j < g.W; ++j) store(image + ((at.h + i) * g.W + at.w + j) * B, bias ? o[j] + b : o[j]);
      }
    }
  }
}

// Z[a][r][k] = (A dy_t A^T)[a] for the 4x4 gradient tiles of tiles t0 + r, r in [r0, r1) (zeros
// past the edges and for tiles past the last).
template <int B>
SPMD_ISA_BODY void gradientTiles(const float* __restrict data, const Tiling& g, int64_t t0, int64_t r0, int64_t r1,
                                 int64_t plane, float* __restrict Z) {
  using Vec = typename Lanes<B>::V;
  const int64_t KB = g.C / B;
  for (int64_t r = r0; r < r1; ++r) {
    const bool exists = t0 + r < g.T;
    const Tile at(g, exists ? t0 + r : g.T - 1);
    for (int64_t kb = 0; kb < KB; ++kb) {
      const float* image = data + (at.n * KB + kb) * g.H * g.W * B;
      Vec e[6][4];  // e[.][j] = A dy[.][j]
      for (int j = 0; j < 4; ++j) {
        Vec d[4], y[6];
        for (int i = 0; i < 4; ++i) {
          if (exists && at.h + i < g.H && at.w + j < g.W) load(d[i], image + ((at.h + i) * g.W + at.w + j) * B);
          else d[i] = Vec{};
        }
        gradientLine(d, y);
        for (int i = 0; i < 6; ++i) e[i][j] = y[i];
      }
      float* out = Z + r * g.C + kb * B;
      for (int i = 0; i < 6; ++i) {
        Vec y[6];
        gradientLine(e[i], y);
        for (int k = 0; k < 6; ++k) store(out + (i * 6 + k) * plane, y[k]);
      }
    }
  }
}

// Where the filter transform streams U past the caches: U read back from memory by the GEMMs
// costs less than the lines' reads for ownership (min of 5 interleaved runs, pinned, AMD Zen 4:
// stage 3's 9.4 MB 7.8 -> 7.3 ms forward and backward data, stage 4's 37.7 MB backward data
// 9.0 -> 8.1); stage 2's 2.4 MB was not measured to gain.
constexpr int64_t kStreamBytes = int64_t{4} << 20;

// Forward: U[a][c][k] = (G w[k][c] G^T)[a] for c in [o0, o1). Backward data: U[a][k][c] from
// w[k][c] turned 180 degrees, for k in [o0, o1). w is OIHW [K, C, 3, 3].
SPMD_ISA_BODY
void filterRows(const float* __restrict w, int64_t K, int64_t C, bool backwardData, int64_t o0, int64_t o1,
                float* __restrict U) {
  const int64_t stride = K * C, inner = backwardData ? C : K;
  // In blocks of 64 inner channels, as Winograd.cpp's filterRows: the reads stay in L1 across
  // the block, and each of U's 36 rows gets 256 bytes in one run.
  // From kStreamBytes of U on, each row's block goes out as whole 64-byte lines of streaming
  // stores (collected in `block36` first); below it plain stores keep U in cache.
  const bool stream = kPoints * K * C * int64_t{sizeof(float)} >= kStreamBytes;
  alignas(64) float block36[kPoints][64];
  for (int64_t block = 0; block < inner; block += 64)
    for (int64_t o = o0; o < o1; ++o) {
      for (int64_t i0 = block; i0 < std::min(block + 64, inner); i0 += kLanes) {
        FilterVec taps[9];
        loadFilterTaps(w, C, backwardData, o, i0, taps);
        FilterVec r[6][3];  // r[.][j] = G g[.][j]
        for (int j = 0; j < 3; ++j) {
          FilterVec g[3], y[6];
          for (int i = 0; i < 3; ++i) g[i] = taps[i * 3 + j];
          filterLine(g, y);
          for (int i = 0; i < 6; ++i) r[i][j] = y[i];
        }
        float* out = stream ? block36[0] + (i0 - block) : U + o * inner + i0;
        const int64_t step = stream ? 64 : stride;
        for (int i = 0; i < 6; ++i) {
          FilterVec y[6];
          filterLine(r[i], y);
          for (int k = 0; k < 6; ++k) store(out + (i * 6 + k) * step, y[k]);
        }
      }
      if (stream) {
        const int64_t n = std::min<int64_t>(64, inner - block);
        for (int a = 0; a < kPoints; ++a) {
          float* dst = U + a * stride + o * inner + block;
          for (int64_t e = 0; e < n; e += 4) _mm_stream_ps(dst + e, _mm_loadu_ps(block36[a] + e));
        }
      }
    }
  if (stream) _mm_sfence();
}

const float* filterTransform(const KernelCall& call, int64_t K, int64_t C, bool backwardData) {
  const float* w = call.in[1].as<const float>();
  return transformedFilter(call, kPoints * C * K, backwardData ? K : C, kGrain,
                           [&](int64_t o0, int64_t o1, float* U) { onOwnIsa<filterRows>(w, K, C, backwardData, o0, o1, U); });
}

// dw[k][c] = G^T dU[.][c][k] G (OIHW) for c in [c0, c1).
SPMD_ISA_BODY
void filterGradientRows(const float* __restrict dU, int64_t C, int64_t K, int64_t c0, int64_t c1,
                        float* __restrict dw) {
  const int64_t stride = C * K;
  for (int64_t k0 = 0; k0 < K; k0 += kLanes)
    for (int64_t c = c0; c < c1; ++c) {
      const float* p = dU + c * K + k0;
      FilterVec q[3][6];  // q[.][j] = G^T p[.][j]
      for (int j = 0; j < 6; ++j) {
        FilterVec column[6], y[3];
        for (int i = 0; i < 6; ++i) load(column[i], p + (i * 6 + j) * stride);
        filterGradientLine(column, y);
        for (int i = 0; i < 3; ++i) q[i][j] = y[i];
      }
      FilterVec taps[9];  // tap i * 3 + j of the 8 lanes' filters
      for (int i = 0; i < 3; ++i) {
        FilterVec y[3];
        filterGradientLine(q[i], y);
        for (int j = 0; j < 3; ++j) taps[i * 3 + j] = y[j];
      }
      storeFilterTaps(taps, C, k0, c, dw);
    }
}

void filterGradientTransform(const float* dU, int64_t C, int64_t K, float* dw) {
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kGrain)
    onOwnIsa<filterGradientRows>(dU, C, K, c0, std::min(c0 + kGrain, C), dw);
}

// `run<B>(r0, r1)` over a chunk's `rows` on the OpenMP pool, kGrain rows an iteration.
template <typename Run>
void overRows(int64_t block, int64_t rows, const Run& run) {
  overBlockRows(
      block, rows, kGrain, [&](int64_t r0, int64_t r1) { run.template operator()<8>(r0, r1); },
      [&](int64_t r0, int64_t r1) { run.template operator()<16>(r0, r1); });
}

void inputTransform(const TensorView& v, const Tiling& g, int64_t t0, int64_t rows, float* V) {
  const float* data = v.as<const float>();
  const int64_t plane = planeOf(rows, g.C);
  overRows(g.B, rows, [&]<int B>(int64_t r0, int64_t r1) { onOwnIsa<inputTiles<B>>(data, g, t0, r0, r1, plane, V); });
}

void outputTransform(const float* M, int64_t t0, int64_t rows, const float* bias, const TensorView& v, const Tiling& g) {
  float* data = v.as<float>();
  const int64_t plane = planeOf(rows, g.C);
  overRows(g.B, rows, [&]<int B>(int64_t r0, int64_t r1) {
    onOwnIsa<outputTiles<B>>(M, g, t0, r0, r1, plane, bias, data);
  });
}

void gradientTransform(const TensorView& v, const Tiling& g, int64_t t0, int64_t rows, float* Z) {
  const float* data = v.as<const float>();
  const int64_t plane = planeOf(rows, g.C);
  overRows(g.B, rows, [&]<int B>(int64_t r0, int64_t r1) { onOwnIsa<gradientTiles<B>>(data, g, t0, r0, r1, plane, Z); });
}

// Forward and backward data: `in` (C channels) convolved with the filter into `out` (K channels).
void convolve(KernelCall& call, const TensorView& in, const TensorView& out, bool backwardData, const float* bias) {
  const Tiling x(in), y(out);
  const int64_t C = x.C, K = y.C;
  const TensorView& w = call.in[1];  // OIHW of the forward convolution
  const float* U = filterTransform(call, w.dim(0), w.dim(1), backwardData);
  auto& [chunks, gemms] = cachedState<ConvolveState>(call, [&] {
    const Chunks c(x.T, std::max(C, K), kPoints);
    return ConvolveState{c, batchedGemms(kPoints, c.rows, C, K, false)};
  });
  float* V = threadScratch(0, kPoints * planeOf(chunks.rows, C));
  float* M = threadScratch(2, kPoints * planeOf(chunks.rows, K));
  for (int64_t i = 0; i < chunks.count; ++i) {
    inputTransform(in, x, i * chunks.rows, chunks.rows, V);
    runGemms(gemms, V, U, M);
    outputTransform(M, i * chunks.rows, chunks.rows, bias, out, y);
  }
}

}  // namespace

void forward4x4(KernelCall& call, const float* bias) { convolve(call, call.in[0], call.out[0], false, bias); }

void backwardData4x4(KernelCall& call) { convolve(call, call.in[0], call.out[0], true, nullptr); }

void backwardFilter4x4(KernelCall& call) {
  const Tiling x(call.in[0]), dy(call.in[1]);
  const int64_t C = x.C, K = dy.C;
  auto& [chunks, first, rest] = cachedState<FilterState>(call, [&] {
    const Chunks c(x.T, std::max(C, K), kPoints);
    return FilterState{c, batchedGemms(kPoints, C, c.rows, K, true), batchedGemms(kPoints, C, c.rows, K, true, true)};
  });
  float* V = threadScratch(0, kPoints * planeOf(chunks.rows, C));
  float* Z = threadScratch(1, kPoints * planeOf(chunks.rows, K));
  float* dU = threadScratch(2, kPoints * C * K);
  for (int64_t i = 0; i < chunks.count; ++i) {
    inputTransform(call.in[0], x, i * chunks.rows, chunks.rows, V);
    gradientTransform(call.in[1], dy, i * chunks.rows, chunks.rows, Z);
    runGemms(i == 0 ? first : rest, V, Z, dU);
  }
  filterGradientTransform(dU, C, K, call.out[0].as<float>());
}

}  // namespace spmd::runtime::cpu::winograd
