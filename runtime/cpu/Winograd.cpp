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
// Chunks); the transforms run on the OpenMP pool, kGrain tiles an iteration, B channels a vector
// (compiled for AVX-512, AVX2 and the baseline, the same bits on each: see inputTiles);
// the buffers are per-thread scratch reused across calls. Up to 64 channels the forward and
// backward data go a few tiles at a time through all three steps in L1 (convolveGrouped), and so
// does the backward filter up to 128, in blocks of up to 64 channels (filterGrouped); wider ones
// run the 16 GEMMs of a chunk as one-thread oneDNN matmuls on slices of the 16 (sliced::Gemm):
// the same bits on any threads.
#include "runtime/cpu/Winograd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include <immintrin.h>

#include "runtime/device/SharedValues.h"
#include "runtime/cpu/BlockedLoops.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/cpu/SlicedOnednn.h"
#include "runtime/cpu/WinogradChunks.h"
#include "runtime/cpu/WinogradLanes.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu::winograd {
namespace {

constexpr int64_t kMaxBlock = 16;
constexpr int64_t kMaxGroupedChannels = 64;  // the grouped convolutions' most channels in and out
constexpr int64_t kMaxGroupedFilterChannels = 128;  // the grouped backward filter's (in blocks of 64)

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

// The transforms' per-tile work, compiled for AVX-512, AVX2 and the baseline (OwnIsa.h) with
// the channel block B fixed at compile time, so that each B-channel row is a vector operation.
// Adds, subtracts and halvings without contraction (this file builds with -ffp-contract=off)
// round the same in every copy: the same bits on every machine, and under any SPMD_MAX_CPU_ISA.
// C channels from the data pointer on; `blocks` is the tensor's channel blocks per image (C / B,
// or more when a transform reads a range of the channels: the backward filter's blocks).
struct Grid {  // Tiled's numbers, for the copies
  int64_t C, H, W, th, tw, T, blocks;
};

Grid gridOf(const Tiled& x) { return {x.C, x.H, x.W, x.th, x.tw, x.tiles(), x.C / x.B}; }

// Tiles per OpenMP iteration: enough work to amortize the ISA dispatch's call.
constexpr int64_t kGrain = 8;

// V[a][r][c] = (B^T d B)[a] for the 4x4 input tiles d of tiles t0 + r, r in [r0, r1), of an
// nChw<B>c tensor (zero outside the image and for tiles past the last); `plane` floats from
// one a's rows to the next's (planeOf).
template <int B>
SPMD_ISA_BODY
void inputTiles(const float* __restrict data, Grid g, int64_t t0, int64_t r0, int64_t r1,
                int64_t plane, float* __restrict V) {
  const int64_t CB = g.C / B, stride = plane;
  for (int64_t r = r0; r < r1; ++r) {
    const bool exists = t0 + r < g.T;
    const int64_t t = exists ? t0 + r : g.T - 1;  // past the last tile: zeros, read nothing
    const int64_t n = t / (g.th * g.tw), h0 = 2 * ((t / g.tw) % g.th) - 1, w0 = 2 * (t % g.tw) - 1;
    for (int64_t cb = 0; cb < CB; ++cb) {
      const float* plane = data + (n * g.blocks + cb) * g.H * g.W * B;
      float d[4][4][B], e[4][4][B];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          if (exists && h >= 0 && h < g.H && w >= 0 && w < g.W) {
            const float* in = plane + (h * g.W + w) * B;
            for (int l = 0; l < B; ++l) d[i][j][l] = in[l];
          } else {
            for (int l = 0; l < B; ++l) d[i][j][l] = 0.f;
          }
        }
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < B; ++l) {
          e[0][j][l] = d[0][j][l] - d[2][j][l];
          e[1][j][l] = d[1][j][l] + d[2][j][l];
          e[2][j][l] = d[2][j][l] - d[1][j][l];
          e[3][j][l] = d[1][j][l] - d[3][j][l];
        }
      float* out = V + r * g.C + cb * B;
      for (int i = 0; i < 4; ++i)
        for (int l = 0; l < B; ++l) {
          out[(i * 4 + 0) * stride + l] = e[i][0][l] - e[i][2][l];
          out[(i * 4 + 1) * stride + l] = e[i][1][l] + e[i][2][l];
          out[(i * 4 + 2) * stride + l] = e[i][2][l] - e[i][1][l];
          out[(i * 4 + 3) * stride + l] = e[i][1][l] - e[i][3][l];
        }
    }
  }
}

// y_t = A^T M_r A (+ bias) for tiles t = t0 + r, r in [r0, r1) (those that exist), written into
// the nChw<B>c tensor `data` (K = g.C channels); `plane` as inputTiles'.
template <int B>
SPMD_ISA_BODY
void outputTiles(const float* __restrict M, Grid g, int64_t t0, int64_t r0, int64_t r1,
                 int64_t plane, const float* __restrict bias, float* __restrict data) {
  const int64_t KB = g.C / B, stride = plane;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t t = t0 + r;
    if (t >= g.T) break;
    const int64_t n = t / (g.th * g.tw), h0 = 2 * ((t / g.tw) % g.th), w0 = 2 * (t % g.tw);
    for (int64_t kb = 0; kb < KB; ++kb) {
      const float* in = M + r * g.C + kb * B;
      float e[2][4][B], o[2][2][B];
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < B; ++l) {
          const float m0 = in[(0 + j) * stride + l], m1 = in[(4 + j) * stride + l],
                      m2 = in[(8 + j) * stride + l], m3 = in[(12 + j) * stride + l];
          e[0][j][l] = m0 + m1 + m2;
          e[1][j][l] = m1 - m2 - m3;
        }
      for (int i = 0; i < 2; ++i)
        for (int l = 0; l < B; ++l) {
          o[i][0][l] = e[i][0][l] + e[i][1][l] + e[i][2][l];
          o[i][1][l] = e[i][1][l] - e[i][2][l] - e[i][3][l];
          if (bias) {
            o[i][0][l] = o[i][0][l] + bias[kb * B + l];
            o[i][1][l] = o[i][1][l] + bias[kb * B + l];
          }
        }
      float* plane = data + (n * KB + kb) * g.H * g.W * B;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          if (h >= g.H || w >= g.W) continue;
          float* out = plane + (h * g.W + w) * B;
          for (int l = 0; l < B; ++l) out[l] = o[i][j][l];
        }
    }
  }
}

// Z[a][r][k] = (A dy_t A^T)[a] for the 2x2 tiles t = t0 + r, r in [r0, r1), of the nChw<B>c
// gradient (zero past an odd edge and for tiles past the last); `plane` as inputTiles'.
template <int B>
SPMD_ISA_BODY
void gradientTiles(const float* __restrict data, Grid g, int64_t t0, int64_t r0, int64_t r1,
                   int64_t plane, float* __restrict Z) {
  const int64_t KB = g.C / B, stride = plane;
  for (int64_t r = r0; r < r1; ++r) {
    const bool exists = t0 + r < g.T;
    const int64_t t = exists ? t0 + r : g.T - 1;  // past the last tile: zeros, read nothing
    const int64_t n = t / (g.th * g.tw), h0 = 2 * ((t / g.tw) % g.th), w0 = 2 * (t % g.tw);
    for (int64_t kb = 0; kb < KB; ++kb) {
      const float* plane = data + (n * g.blocks + kb) * g.H * g.W * B;
      float d[2][2][B], e[4][2][B];
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          if (exists && h < g.H && w < g.W) {
            const float* in = plane + (h * g.W + w) * B;
            for (int l = 0; l < B; ++l) d[i][j][l] = in[l];
          } else {
            for (int l = 0; l < B; ++l) d[i][j][l] = 0.f;
          }
        }
      for (int j = 0; j < 2; ++j)
        for (int l = 0; l < B; ++l) {
          e[0][j][l] = d[0][j][l];
          e[1][j][l] = d[0][j][l] + d[1][j][l];
          e[2][j][l] = d[0][j][l] - d[1][j][l];
          e[3][j][l] = -d[1][j][l];
        }
      float* out = Z + r * g.C + kb * B;
      for (int i = 0; i < 4; ++i)
        for (int l = 0; l < B; ++l) {
          out[(i * 4 + 0) * stride + l] = e[i][0][l];
          out[(i * 4 + 1) * stride + l] = e[i][0][l] + e[i][1][l];
          out[(i * 4 + 2) * stride + l] = e[i][0][l] - e[i][1][l];
          out[(i * 4 + 3) * stride + l] = -e[i][1][l];
        }
    }
  }
}

// Forward: U[a][c][k] = (G w[k][c] G^T)[a] for c in [o0, o1). Backward data: U[a][k][c] from
// w[k][c] turned 180 degrees, for k in [o0, o1) (the input gradient convolves dy, K channels in,
// with the transposed filter). w is OIHW [K, C, 3, 3]. 8 filters at once, one a lane
// (WinogradLanes.h).
SPMD_ISA_BODY
void filterRows(const float* __restrict w, int64_t K, int64_t C, bool backwardData, int64_t o0,
                int64_t o1, float* __restrict U) {
  const int64_t stride = K * C, inner = backwardData ? C : K;
  // In blocks of 64 inner channels: the forward's reads (each lane's 3x3 filters for o0..o1
  // lie together) stay in L1 across the block, and each U row gets 256 bytes in one run.
  for (int64_t block = 0; block < inner; block += 64)
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t i0 = block; i0 < std::min(block + 64, inner); i0 += kLanes) {
        FilterVec g[9], r[4][3];
        loadFilterTaps(w, C, backwardData, o, i0, g);
        for (int j = 0; j < 3; ++j) {
          r[0][j] = g[j];
          r[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
          r[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
          r[3][j] = g[6 + j];
        }
        // Plain stores, so that U (up to 16 MB) stays in the last-level cache for the GEMMs that
        // read it next. Streaming stores were slower (AMD Zen 4, stage 4's 512 channels: 20.0 ms
        // a forward call with 32-byte streaming stores, 18.3-18.9 with whole 64-byte lines,
        // 15.4-16.1 with these): the 16 rows' partial lines overflow the write-combining buffers,
        // and the GEMMs then read U back from memory.
        float* u = U + o * inner + i0;
        for (int i = 0; i < 4; ++i) {
          store(u + (i * 4) * stride, r[i][0]);
          store(u + (i * 4 + 1) * stride, FilterVec(0.5f * (r[i][0] + r[i][1] + r[i][2])));
          store(u + (i * 4 + 2) * stride, FilterVec(0.5f * (r[i][0] - r[i][1] + r[i][2])));
          store(u + (i * 4 + 3) * stride, r[i][2]);
        }
      }
}

const float* filterTransform(const KernelCall& call, int64_t K, int64_t C, bool backwardData) {
  const float* w = call.in[1].as<const float>();
  return transformedFilter(call, 16 * C * K, backwardData ? K : C, kGrain, [&](int64_t o0, int64_t o1, float* U) {
    onOwnIsa<filterRows>(w, K, C, backwardData, o0, o1, U);
  });
}

// dw[k][c] = G^T dU[.][c][k] G (OIHW) for c in [c0, c1), 8 filters at once, one a lane.
SPMD_ISA_BODY
void filterGradientRows(const float* __restrict dU, int64_t C, int64_t K, int64_t c0, int64_t c1,
                        float* __restrict dw) {
  const int64_t stride = C * K;
  // The result's channels outside: each lane writes its 3x3 filters for c0..c1 into one run.
  for (int64_t k0 = 0; k0 < K; k0 += kLanes)
    for (int64_t c = c0; c < c1; ++c) {
      const float* p = dU + c * K + k0;
      FilterVec q[3][4], out[9];
      for (int j = 0; j < 4; ++j) {
        FilterVec p0, p1, p2, p3;
        load(p0, p + j * stride);
        load(p1, p + (4 + j) * stride);
        load(p2, p + (8 + j) * stride);
        load(p3, p + (12 + j) * stride);
        q[0][j] = p0 + 0.5f * (p1 + p2);
        q[1][j] = 0.5f * (p1 - p2);
        q[2][j] = 0.5f * (p1 + p2) + p3;
      }
      for (int i = 0; i < 3; ++i) {
        out[i * 3 + 0] = q[i][0] + 0.5f * (q[i][1] + q[i][2]);
        out[i * 3 + 1] = 0.5f * (q[i][1] - q[i][2]);
        out[i * 3 + 2] = 0.5f * (q[i][1] + q[i][2]) + q[i][3];
      }
      storeFilterTaps(out, C, k0, c, dw);
    }
}

void filterGradientTransform(const float* dU, int64_t C, int64_t K, float* dw) {
#pragma omp parallel for schedule(static)
  for (int64_t c0 = 0; c0 < C; c0 += kGrain)
    onOwnIsa<filterGradientRows>(dU, C, K, c0, c0 + kGrain < C ? c0 + kGrain : C, dw);
}

std::atomic<int64_t> chunkFloats{int64_t{1} << 20};  // 4 MB: Chunks' most
// The most rows a chunk takes, whatever its channels: at 16 channels 1024 rows of 36 planes are
// 2.4 MB of V and as much of M, and ResNet-18's width-16 stage 1 (1568 tiles a replica of 32
// images, one thread) ran in two chunks of 784 rows faster than in one of 1568 (F(4x4, 3x3),
// AMD Zen 4, min of 5 interleaved: forward 0.71 against 0.78 ms); with more channels the 4 MB
// bound above is the lower one.
constexpr int64_t kMostRows = 1024;

// Up to 64 channels the 16 GEMMs are too thin for a library GEMM and the transformed tiles not
// worth a trip through memory: the convolutions take kGroup tiles at a time through the
// transforms and the GEMMs while they are in L1 ("grouped").
constexpr int kGroup = 6;

// The forward and backward data run grouped up to 64 channels, the result's a multiple of 16.
bool groupedFits(int64_t C, int64_t K) { return C <= kMaxGroupedChannels && K <= kMaxGroupedChannels && K % 16 == 0; }

// The backward filter, up to 128 channels in and out (the filter's a multiple of 16 wide), in
// blocks of up to 64: at 64 and 128 channels (ResNet-18's stages 1 and 2 at 28x28 input) 25% and
// 15% faster than oneDNN's direct backward-weights kernel on AVX-512 (AMD Zen 5, 2026-11-29; 6.0
// against 8.0 ms, 6.6 against 7.8), 38% and 30% on AVX2; at 256 channels on 7x7 (4x4 tiles)
// 30% slower, so not offered there.
bool groupedFilterFits(int64_t C, int64_t K) {
  return C <= kMaxGroupedFilterChannels && K <= kMaxGroupedFilterChannels && K % 16 == 0;
}

// The grouped code is written twice: as vector copies per ISA (WinogradGroups.inc: register-tiled
// GEMMs) and portably (the transforms above and the loops below with std::fma, exact). Both do
// the same operations in the same order: the same bits.

// M[a][r][k] = sum_c V[a][r][c] U[a][c][k] for the group's rows r: each sum in c order.
void groupGemms(const float* V, const float* U, int64_t C, int64_t K, float* M) {
  for (int a = 0; a < 16; ++a)
    for (int r = 0; r < kGroup; ++r)
      for (int64_t k = 0; k < K; ++k) {
        float acc = 0.f;
        for (int64_t c = 0; c < C; ++c) acc = std::fma(V[(a * kGroup + r) * C + c], U[(a * C + c) * K + k], acc);
        M[(a * kGroup + r) * K + k] = acc;
      }
}

// dU[a][c][k] += sum_r V[a][r][c] Z[a][r][k], r in group order.
void groupFilterGemms(const float* V, const float* Z, int64_t C, int64_t K, float* dU) {
  for (int a = 0; a < 16; ++a)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < K; ++k) {
        float acc = dU[(a * C + c) * K + k];
        for (int r = 0; r < kGroup; ++r) acc = std::fma(V[(a * kGroup + r) * C + c], Z[(a * kGroup + r) * K + k], acc);
        dU[(a * C + c) * K + k] = acc;
      }
}

// The tiles t0 + r, r < kGroup, walked without divisions.
struct TileWalk {
  int64_t n, ty, tx, th, tw;
  TileWalk(const Grid& g, int64_t t0)
      : n(t0 / (g.th * g.tw)), ty((t0 / g.tw) % g.th), tx(t0 % g.tw), th(g.th), tw(g.tw) {}
  void next() {
    if (++tx == tw) {
      tx = 0;
      if (++ty == th) ty = 0, ++n;
    }
  }
};

// The grouped code's vector copies (WinogradGroups.inc): AVX2 with FMA (8 lanes, GEMM tiles of
// 6 x 2 vectors in 16 registers) and AVX-512 (16 lanes, tiles up to 6 x 4 vectors in 32).
#define SPMD_GROUP_LOAD _mm256_loadu_ps
#define SPMD_GROUP_STORE _mm256_storeu_ps
#define SPMD_GROUP_FMA _mm256_fmadd_ps
#define SPMD_GROUP_NAMESPACE avx2
#define SPMD_GROUP_TARGET SPMD_TARGET_AVX2
#define SPMD_GROUP_VECTOR __m256
#define SPMD_GROUP_TILE 2
#include "runtime/cpu/WinogradGroups.inc"
#define SPMD_GROUP_LOAD _mm512_loadu_ps
#define SPMD_GROUP_STORE _mm512_storeu_ps
#define SPMD_GROUP_FMA _mm512_fmadd_ps
#define SPMD_GROUP_NAMESPACE avx512
#define SPMD_GROUP_TARGET SPMD_TARGET_AVX512
#define SPMD_GROUP_VECTOR __m512
#define SPMD_GROUP_TILE 4
#include "runtime/cpu/WinogradGroups.inc"

// The widest copy whose vectors a channel block of B fills: nChw8c takes AVX2's under AVX-512.
template <int B>
OwnIsa widestFor(OwnIsa isa) {
  return B == 8 ? std::min(isa, OwnIsa::avx2) : isa;
}

// The chunked path's transforms of `rows` tiles from t0 on the OpenMP pool, kGrain rows an
// iteration: `run<B>(copy, r0, r1)` with the widest vector copy of the grouped code's transforms
// for channel block B (marked as run), or portable for the portable code.
template <typename Run>
void transformRows(int64_t block, int64_t rows, const Run& run) {
  const OwnIsa isa = ownIsa();
  auto rowsOf = [&]<int B>(int64_t r0, int64_t r1) {
    const OwnIsa copy = widestFor<B>(isa);
    if (copy != OwnIsa::portable) markOwnIsaRun(copy);
    run.template operator()<B>(copy, r0, r1);
  };
  overBlockRows(
      block, rows, kGrain, [&](int64_t r0, int64_t r1) { rowsOf.template operator()<8>(r0, r1); },
      [&](int64_t r0, int64_t r1) { rowsOf.template operator()<16>(r0, r1); });
}

void inputTransform(const Tiled& x, int64_t t0, int64_t rows, float* V) {
  const float* data = x.v.as<const float>();
  const Grid g = gridOf(x);
  const int64_t plane = planeOf(rows, g.C);
  transformRows(x.B, rows, [&]<int B>(OwnIsa copy, int64_t r0, int64_t r1) {
    if constexpr (B == 16)
      if (copy == OwnIsa::avx512) return avx512::inputRows<B>(data, g, t0 + r0, r1 - r0, plane, V + r0 * g.C);
    if (copy == OwnIsa::avx2) return avx2::inputRows<B>(data, g, t0 + r0, r1 - r0, plane, V + r0 * g.C);
    onOwnIsa<inputTiles<B>>(data, g, t0, r0, r1, plane, V);
  });
}

void outputTransform(const float* M, int64_t t0, int64_t rows, const float* bias, const Tiled& y) {
  float* data = y.v.as<float>();
  const Grid g = gridOf(y);
  const int64_t plane = planeOf(rows, g.C);
  transformRows(y.B, rows, [&]<int B>(OwnIsa copy, int64_t r0, int64_t r1) {
    const float* m = M + r0 * g.C;
    if constexpr (B == 16)
      if (copy == OwnIsa::avx512) return avx512::outputRows<B>(m, g, g.C, t0 + r0, r1 - r0, plane, bias, data);
    if (copy == OwnIsa::avx2) return avx2::outputRows<B>(m, g, g.C, t0 + r0, r1 - r0, plane, bias, data);
    onOwnIsa<outputTiles<B>>(M, g, t0, r0, r1, plane, bias, data);
  });
}

void gradientTransform(const Tiled& dy, int64_t t0, int64_t rows, float* Z) {
  const float* data = dy.v.as<const float>();
  const Grid g = gridOf(dy);
  const int64_t plane = planeOf(rows, g.C);
  transformRows(dy.B, rows, [&]<int B>(OwnIsa copy, int64_t r0, int64_t r1) {
    if constexpr (B == 16)
      if (copy == OwnIsa::avx512) return avx512::gradientRows<B>(data, g, t0 + r0, r1 - r0, plane, Z + r0 * g.C);
    if (copy == OwnIsa::avx2) return avx2::gradientRows<B>(data, g, t0 + r0, r1 - r0, plane, Z + r0 * g.C);
    onOwnIsa<gradientTiles<B>>(data, g, t0, r0, r1, plane, Z);
  });
}

// One group of the forward or backward data: the widest vector copy, or the portable code.
template <int B>
void convolveGroup(OwnIsa isa, const float* in, const Grid& gx, const Grid& gy, const float* U, int64_t t0,
                   const float* bias, float* out, float* V, float* M) {
  const OwnIsa copy = widestFor<B>(isa);
  if constexpr (B == 16)
    if (copy == OwnIsa::avx512) return avx512::convolveGroup<B>(in, gx, gy.C, U, t0, bias, out, V, M);
  if (copy == OwnIsa::avx2) return avx2::convolveGroup<B>(in, gx, gy.C, U, t0, bias, out, V, M);
  onOwnIsa<inputTiles<B>>(in, gx, t0, 0, kGroup, kGroup * gx.C, V);
  groupGemms(V, U, gx.C, gy.C, M);
  onOwnIsa<outputTiles<B>>(M, gy, t0, 0, kGroup, kGroup * gy.C, bias, out);
}

// One group of the backward filter, added into dU: as convolveGroup.
template <int B>
void filterGroup(OwnIsa isa, const float* x, const Grid& gx, const float* dy, const Grid& gy, int64_t t0,
                 float* V, float* Z, float* dU) {
  const OwnIsa copy = widestFor<B>(isa);
  if constexpr (B == 16)
    if (copy == OwnIsa::avx512) return avx512::filterGroup<B>(x, gx, dy, gy, t0, V, Z, dU);
  if (copy == OwnIsa::avx2) return avx2::filterGroup<B>(x, gx, dy, gy, t0, V, Z, dU);
  onOwnIsa<inputTiles<B>>(x, gx, t0, 0, kGroup, kGroup * gx.C, V);
  onOwnIsa<gradientTiles<B>>(dy, gy, t0, 0, kGroup, kGroup * gy.C, Z);
  groupFilterGemms(V, Z, gx.C, gy.C, dU);
}

// `in` (C channels) convolved with the filter transform U into `out` (K channels), a group of
// tiles an iteration on the OpenMP pool (each output from its own tile alone: any thread count
// gives the same bits).
void convolveGrouped(const Tiled& x, const Tiled& y, const float* U, const float* bias) {
  const float* in = x.v.as<const float>();
  float* out = y.v.as<float>();
  const Grid gx = gridOf(x), gy = gridOf(y);
  const int64_t groups = (x.tiles() + kGroup - 1) / kGroup;
  const OwnIsa isa = ownIsa();
#pragma omp parallel
  {
    // Each thread's own scratch (buffer 1 holds the caller's U).
    float* V = threadScratch(0, 16 * kGroup * x.C);
    float* M = threadScratch(2, 16 * kGroup * y.C);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < groups; ++i) {
      if (x.B == 16) convolveGroup<16>(isa, in, gx, gy, U, i * kGroup, bias, out, V, M);
      else convolveGroup<8>(isa, in, gx, gy, U, i * kGroup, bias, out, V, M);
    }
  }
}

// The widest block of at most 64 of `channels` that is a multiple of `unit` and divides them:
// the backward filter's dU block (16 x Cb x Kb floats, at most 256 KB) stays in L2.
int64_t channelSpan(int64_t channels, int64_t unit) {
  for (int64_t span = std::min<int64_t>(channels, kMaxGroupedChannels) / unit * unit; span > unit; span -= unit)
    if (channels % span == 0) return span;
  return unit;
}

// The filter gradient's dU (16 x C x K) grouped. The work goes in items of (image slice, block of
// Cb input channels, block of Kb result channels), fixed by the shapes alone: the images in at most
// 16 / (blocks) slices of equal size (at least one), so that there are about 16 items. Each item
// sums its slice's tiles' products in order into its own [16][Cb][Kb] block; the slices are added
// in slice order into [16][C][K]: the same bits on any thread count (and each element's bits do
// not depend on the blocks: its sum reads its own channel's V and Z only). Returns the sum (in
// the caller's scratch buffer 1).
float* filterGrouped(const Tiled& x, const Tiled& dy) {
  const int64_t C = x.C, K = dy.C, tilesPerImage = x.th * x.tw;
  const int64_t Cb = channelSpan(C, x.B), Kb = channelSpan(K, 16), cBlocks = C / Cb, kBlocks = K / Kb;
  const int64_t wanted = std::max<int64_t>(1, 16 / (cBlocks * kBlocks));
  const int64_t imagesPerSlice = (x.N + wanted - 1) / wanted, slices = (x.N + imagesPerSlice - 1) / imagesPerSlice;
  const int64_t per = 16 * C * K, block = 16 * Cb * Kb, items = slices * cBlocks * kBlocks;
  float* dU = threadScratch(1, (slices + 1) * per);  // the items' blocks, then the sum
  std::memset(dU, 0, sizeof(float) * slices * per);
  const float *xs = x.v.as<const float>(), *dys = dy.v.as<const float>();
  const int64_t xPlane = x.H * x.W * x.B, dyPlane = dy.H * dy.W * dy.B;
  const OwnIsa isa = ownIsa();
  float* sum = dU + slices * per;
#pragma omp parallel
  {
    float* V = threadScratch(0, 16 * kGroup * Cb);
    float* Z = threadScratch(2, 16 * kGroup * Kb);
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; ++item) {
      const int64_t s = item / (cBlocks * kBlocks), cb = item / kBlocks % cBlocks, kb = item % kBlocks;
      // The slice's tiles [first, last): tiles past it read as zeros (Grid::T).
      const int64_t first = s * imagesPerSlice * tilesPerImage;
      const int64_t last = std::min(x.N, (s + 1) * imagesPerSlice) * tilesPerImage;
      Grid gx = gridOf(x), gy = gridOf(dy);
      gx.T = gy.T = last;
      gx.C = Cb, gy.C = Kb;
      const float* xb = xs + cb * (Cb / x.B) * xPlane;
      const float* dyb = dys + kb * (Kb / dy.B) * dyPlane;
      float* own = dU + s * per + (cb * kBlocks + kb) * block;
      for (int64_t t0 = first; t0 < last; t0 += kGroup) {
        if (x.B == 16) filterGroup<16>(isa, xb, gx, dyb, gy, t0, V, Z, own);
        else filterGroup<8>(isa, xb, gx, dyb, gy, t0, V, Z, own);
      }
    }
    // sum[a][c][k]: the slices' blocks added in slice order.
#pragma omp for schedule(static)
    for (int64_t i = 0; i < per; ++i) {
      const int64_t a = i / (C * K), c = i / K % C, k = i % K;
      const int64_t at = ((c / Cb) * kBlocks + k / Kb) * block + (a * Cb + c % Cb) * Kb + k % Kb;
      float total = dU[at];
      for (int64_t s = 1; s < slices; ++s) total += dU[s * per + at];
      sum[i] = total;
    }
  }
  return sum;
}

// Forward and backward data: `in` (C channels) convolved with the filter into `out` (K
// channels): up to 64 channels a group of tiles at a time (convolveGrouped), from there in chunks
// through one batched oneDNN GEMM.
void convolve(KernelCall& call, const TensorView& in, const TensorView& out, bool backwardData,
              const float* bias, Path path) {
  Tiled x(in), y(out);
  const int64_t C = x.C, K = y.C;
  const TensorView& w = call.in[1];  // OIHW of the forward convolution
  const float* U = filterTransform(call, w.dim(0), w.dim(1), backwardData);
  if (path == Path::Grouped) return convolveGrouped(x, y, U, bias);
  auto& [chunks, gemms] = cachedState<ConvolveState>(call, [&] {
    Chunks c(x.tiles(), std::max(C, K), 16);
    return ConvolveState{c, batchedGemms(16, c.rows, C, K, false)};
  });
  float *V = threadScratch(0, 16 * planeOf(chunks.rows, C)), *M = threadScratch(2, 16 * planeOf(chunks.rows, K));
  for (int64_t i = 0; i < chunks.count; ++i) {
    inputTransform(x, i * chunks.rows, chunks.rows, V);
    runGemms(gemms, V, U, M);
    outputTransform(M, i * chunks.rows, chunks.rows, bias, y);
  }
}

}  // namespace

namespace {

// The two activations (x and y, dy and dx, x and dy) and the filter of a step that Winograd can
// compute: f32, a 3x3 filter, stride 1, padding 1, activations in one blocked layout of at most
// kMaxBlock channels a block, whole blocks, the same size.
struct Operands {
  const TensorView *a = nullptr, *other = nullptr, *w = nullptr;
  bool filter = false;
};

std::optional<Operands> operandsOf(const KernelCall& call) {
  if (call.in.size() < 2 || call.out.empty()) return std::nullopt;
  Operands o;
  o.filter = call.step.op == "conv2d_backward_filter";
  o.a = &call.in[0];
  o.other = o.filter ? &call.in[1] : &call.out[0];
  o.w = o.filter ? &call.out[0] : &call.in[1];
  const TensorView &a = *o.a, &other = *o.other, &w = *o.w;
  if (a.dtype != DType::f32 || a.rank() != 4 || other.rank() != 4 || w.rank() != 4) return std::nullopt;
  if (a.layout.empty() || a.layout != other.layout) return std::nullopt;
  const int64_t block = channelBlock(a.layout);
  if (block > kMaxBlock || a.dim(1) % block || other.dim(1) % block) return std::nullopt;
  if (w.dim(2) != 3 || w.dim(3) != 3) return std::nullopt;
  const auto& stride = convAttrs(call.step).stride;
  const auto& padding = convAttrs(call.step).padding;
  if (stride != std::vector<int64_t>{1, 1} || padding != std::vector<int64_t>{1, 1} || a.dim(2) != other.dim(2) ||
      a.dim(3) != other.dim(3))
    return std::nullopt;
  return o;
}

bool grouped(const Operands& o) {
  return o.filter ? groupedFilterFits(o.a->dim(1), o.other->dim(1)) : groupedFits(o.a->dim(1), o.other->dim(1));
}

}  // namespace

Chunks::Chunks(int64_t tiles, int64_t channels, int64_t planes) {
  // Past 256 channels a chunk's rows stop shrinking: at 512 (ResNet-18's stage 4) the filter
  // transform (16 x C x K floats, 16 MB) read again for each chunk cost more than the larger
  // chunk (AMD Zen 5: 5.9 against 5.1 ms of GEMMs in two chunks of 128 rows or one of 256).
  const int64_t most =
      std::clamp<int64_t>(chunkFloats.load() / (planes * std::min<int64_t>(channels, 256)), 1, kMostRows);
  count = (tiles + most - 1) / most;
  rows = (tiles + count - 1) / count;
}

sliced::Gemm batchedGemms(int64_t planes, int64_t M, int64_t R, int64_t Nc, bool transposedSrc, bool accumulate) {
  using namespace dnnl;
  using dims = memory::dims;
  // Padding the filters' planes (U, dU) too measured no faster (AMD Zen 4).
  const auto f32 = memory::data_type::f32;
  memory::desc a = transposedSrc ? memory::desc(dims{planes, M, R}, f32, dims{planeOf(R, M), 1, M})
                                 : memory::desc(dims{planes, M, R}, f32, dims{planeOf(M, R), R, 1});
  memory::desc b = transposedSrc ? memory::desc(dims{planes, R, Nc}, f32, dims{planeOf(R, Nc), Nc, 1})
                                 : memory::desc(dims{planes, R, Nc}, f32, memory::format_tag::abc);
  memory::desc c = transposedSrc ? memory::desc(dims{planes, M, Nc}, f32, memory::format_tag::abc)
                                 : memory::desc(dims{planes, M, Nc}, f32, dims{planeOf(M, Nc), Nc, 1});
  return sliced::Gemm(a, b, c, accumulate);
}

const float* transformedFilter(const KernelCall& call, int64_t floats, int64_t outer, int64_t grain,
                               const std::function<void(int64_t, int64_t, float*)>& rows) {
  const int64_t grains = (outer + grain - 1) / grain;
  auto make = [&](int64_t first, int64_t last, float* U) {  // grains [first, last)
#pragma omp parallel for schedule(static)
    for (int64_t g = first; g < last; ++g) rows(g * grain, std::min((g + 1) * grain, outer), U);
  };
  if (call.shared) {
    // Parts enough for the replicas that come together to share it evenly.
    const int64_t parts = std::min<int64_t>(grains, 16);
    const TensorView& w = call.in[1];
    const std::span<const std::byte> bytes(static_cast<const std::byte*>(w.data), size_t(w.numel()) * sizeof(float));
    if (const float* U = call.shared->share(call.stepIndex, bytes, size_t(floats), parts, [&](int64_t p0, int64_t p1, float* U) {
          make(p0 * grains / parts, p1 * grains / parts, U);
        }))
      return U;
  }
  float* U = threadScratch(1, floats);
  make(0, grains, U);
  return U;
}

void runGemms(sliced::Gemm& gemms, const float* a, const float* b, float* c) {
  gemms.run({{DNNL_ARG_SRC, const_cast<float*>(a)}, {DNNL_ARG_WEIGHTS, const_cast<float*>(b)},
             {DNNL_ARG_DST, c}});
}

bool runs(const KernelCall& call, Path path) {
  const auto o = operandsOf(call);
  return o && (path != Path::Grouped || grouped(*o));
}

bool pays(const KernelCall& call, Path path) {
  const auto o = operandsOf(call);
  if (!o || path == Path::Chunked4x4 || (path == Path::Grouped && !grouped(*o))) return false;
  // The forward and backward data paid from 16 channels up to 64 (grouped: ResNet-18's 16-64-
  // channel layers 10-35% faster than oneDNN's direct kernels) and from 128 (chunked: between
  // them the grouped GEMMs' filters leave L1 and the chunked transforms cost what the GEMMs
  // save); the backward filter from 64, where oneDNN's direct backward-weights kernel ran at
  // ~40% of the AVX2 peak. From 64 to 127 channels only on even sizes: on odd ones the 2x2 output
  // tiles cover padding too (7x7 takes 4x4 tiles, 31% more work), and at ResNet-18's width 16
  // stage 3 (64 channels, 7x7) the direct kernel was faster (4.9 against 5.2 ms). All measured
  // on AMD Zen 3 (AVX2).
  const TensorView &a = *o->a, &w = *o->w;
  const int64_t least = path == Path::Grouped ? 16 : o->filter ? 64 : 128;
  if (w.dim(0) < least || w.dim(1) < least) return false;
  if (path == Path::Chunked && grouped(*o)) return false;  // the grouped path comes first
  return !(o->filter && (w.dim(0) < 128 || w.dim(1) < 128) && (a.dim(2) % 2 || a.dim(3) % 2));
}

int64_t setChunkFloats(int64_t floats) {
  if (floats < 1) throw Error("Winograd chunks need at least one float, got " + std::to_string(floats));
  return chunkFloats.exchange(floats);
}

void forward(KernelCall& call, Path path) {
  const float* bias = call.in.size() > 2 ? call.in[2].as<const float>() : nullptr;
  if (path == Path::Chunked4x4) return forward4x4(call, bias);
  convolve(call, call.in[0], call.out[0], false, bias, path);
}

void backwardData(KernelCall& call, Path path) {
  if (path == Path::Chunked4x4) return backwardData4x4(call);
  convolve(call, call.in[0], call.out[0], true, nullptr, path);
}

void backwardFilter(KernelCall& call, Path path) {
  if (path == Path::Chunked4x4) return backwardFilter4x4(call);
  Tiled x(call.in[0]), dy(call.in[1]);
  const int64_t C = x.C, K = dy.C;
  if (path == Path::Grouped) return filterGradientTransform(filterGrouped(x, dy), C, K, call.out[0].as<float>());
  auto& [chunks, first, rest] = cachedState<FilterState>(call, [&] {
    Chunks c(x.tiles(), std::max(C, K), 16);
    return FilterState{c, batchedGemms(16, C, c.rows, K, true),
                       batchedGemms(16, C, c.rows, K, true, true)};
  });
  float *V = threadScratch(0, 16 * planeOf(chunks.rows, C)), *Z = threadScratch(1, 16 * planeOf(chunks.rows, K)),
        *dU = threadScratch(2, 16 * C * K);
  for (int64_t i = 0; i < chunks.count; ++i) {
    inputTransform(x, i * chunks.rows, chunks.rows, V);
    gradientTransform(dy, i * chunks.rows, chunks.rows, Z);
    runGemms(i == 0 ? first : rest, V, Z, dU);
  }
  filterGradientTransform(dU, C, K, call.out[0].as<float>());
}

}  // namespace spmd::runtime::cpu::winograd
