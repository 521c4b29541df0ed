// The own f32 GEMM (runtime/cpu/OwnGemm.h), in BLIS's loop order: for each block of B's columns
// (at most kMostCols) and each kDepth slice of the sum, B's block is packed into panels of one
// tile's width; for each block of A's rows (at most kMostRows) A's is packed into panels of one
// tile's height; then every tile of the block runs the register tile on a panel of each. A's
// block stays in L2 while B's panels pass through L1. On the OpenMP pool: a batch of many entries
// an entry a task; otherwise the threads share B's packed panels and take A's row blocks in turn.
// Each result element is computed by one thread.
#include "runtime/cpu/OwnGemm.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>

#include <immintrin.h>

#include "runtime/cpu/BlockedLoops.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

constexpr int64_t kDepth = 256;       // terms of the sum per packed slice
constexpr int64_t kMostRows = 144;    // rows of A per packed block (a multiple of every tile's rows)
constexpr int64_t kMostCols = 1024;   // columns of B per packed block (a multiple of every tile's)
constexpr int kMostTileFloats = 12 * 32;

// The portable tile: scalars, each term through std::fma (as the vector copies' instructions).
namespace portable {
constexpr int kRows = 4, kCols = 8;
void tile(int64_t kc, const float* __restrict ap, const float* __restrict bp, float* c, int64_t ldc, bool accumulate) {
  float acc[kRows][kCols];
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kCols; ++j) acc[r][j] = accumulate ? c[r * ldc + j] : 0.0f;
  for (int64_t p = 0; p < kc; ++p, ap += kRows, bp += kCols)
    for (int r = 0; r < kRows; ++r)
      for (int j = 0; j < kCols; ++j) acc[r][j] = std::fma(ap[r], bp[j], acc[r][j]);
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < kCols; ++j) c[r * ldc + j] = acc[r][j];
}
}  // namespace portable

// The vector copies (OwnGemmTile.inc): AVX2 with FMA (8 lanes, 6 x 2 vectors in 16 registers)
// and AVX-512 (16 lanes, 12 x 2 vectors in 32).
#define SPMD_GEMM_NAMESPACE avx2
#define SPMD_GEMM_TARGET SPMD_TARGET_AVX2
#define SPMD_GEMM_VECTOR __m256
#define SPMD_GEMM_LOAD _mm256_loadu_ps
#define SPMD_GEMM_STORE _mm256_storeu_ps
#define SPMD_GEMM_FMA _mm256_fmadd_ps
#define SPMD_GEMM_BROADCAST _mm256_broadcast_ss
#define SPMD_GEMM_ZERO _mm256_setzero_ps
#define SPMD_GEMM_ROWS 6
#include "runtime/cpu/OwnGemmTile.inc"
#define SPMD_GEMM_NAMESPACE avx512
#define SPMD_GEMM_TARGET SPMD_TARGET_AVX512
#define SPMD_GEMM_VECTOR __m512
#define SPMD_GEMM_LOAD _mm512_loadu_ps
#define SPMD_GEMM_STORE _mm512_storeu_ps
#define SPMD_GEMM_FMA _mm512_fmadd_ps
#define SPMD_GEMM_BROADCAST(p) _mm512_set1_ps(*(p))
#define SPMD_GEMM_ZERO _mm512_setzero_ps
#define SPMD_GEMM_ROWS 12
#include "runtime/cpu/OwnGemmTile.inc"

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t roundUp(int64_t a, int64_t b) { return ceilDiv(a, b) * b; }

// A's rows [i0, i0 + rows) and terms [p0, p0 + kc) as panels of H rows, each kc x H (row-major,
// zeros past the last row). Each of A's rows or columns is read along its contiguous direction.
// Lines: the ISA's transposeLines<H, H> for whole panels of rows contiguous along the sum (A
// itself, not A^T), or null.
template <int H, auto Lines>
void packA(const GemmOperands& g, const float* a, int64_t i0, int64_t rows, int64_t p0, int64_t kc, float* out) {
  // A^T: a term's rows lie together. Each term's row segment is read once into every whole panel
  // (panel by panel, the terms' lines lie a row of A^T apart and thrash L1's sets).
  const int64_t whole = g.aRow == 1 ? rows / H * H : 0;
  for (int64_t p = 0; whole && p < kc; ++p) {
    const float* from = a + i0 + (p0 + p) * g.aCol;
    for (int64_t ip = 0; ip < whole; ip += H) std::memcpy(out + ip * kc + p * H, from + ip, sizeof(float) * H);
  }
  for (int64_t ip = whole; ip < rows; ip += H) {
    float* panel = out + ip * kc;
    const int64_t live = std::min<int64_t>(H, rows - ip);
    const float* from = a + (i0 + ip) * g.aRow + p0 * g.aCol;
    if (live < H) std::fill_n(panel, kc * H, 0.0f);
    if constexpr (Lines != nullptr)
      if (g.aCol == 1 && live == H) {
        Lines(from, g.aRow, kc, panel);
        continue;
      }
    for (int64_t r = 0; r < live; ++r) {
      const float* row = from + r * g.aRow;
      for (int64_t p = 0; p < kc; ++p) panel[p * H + r] = row[p * g.aCol];
    }
  }
}

// B's terms [p0, p0 + kc) and columns [j0, j0 + cols) as panels of W columns, each kc x W.
// Lines: the ISA's transposeLines<W, W> for whole panels of B^T's columns, or null.
template <int W, auto Lines>
void packB(const GemmOperands& g, const float* b, int64_t p0, int64_t kc, int64_t j0, int64_t cols, float* out) {
  for (int64_t jp = 0; jp < cols; jp += W, out += kc * W) {
    const int64_t live = std::min<int64_t>(W, cols - jp);
    const float* from = b + p0 * g.bRow + (j0 + jp) * g.bCol;
    if (live < W) std::fill_n(out, kc * W, 0.0f);
    if (g.bCol == 1 && live == W) {  // a term's columns lie together
      for (int64_t p = 0; p < kc; ++p) std::memcpy(out + p * W, from + p * g.bRow, sizeof(float) * W);
      continue;
    }
    if constexpr (Lines != nullptr)
      if (g.bRow == 1 && live == W) {
        Lines(from, g.bCol, kc, out);
        continue;
      }
    for (int64_t j = 0; j < live; ++j) {
      const float* column = from + j * g.bCol;
      for (int64_t p = 0; p < kc; ++p) out[p * W + j] = column[p * g.bRow];
    }
  }
}

// An ISA's register tile and the packing of its panels.
struct Tile {
  int rows, cols;
  void (*run)(int64_t, const float*, const float*, float*, int64_t, bool);
  void (*packA)(const GemmOperands&, const float*, int64_t, int64_t, int64_t, int64_t, float*);
  void (*packB)(const GemmOperands&, const float*, int64_t, int64_t, int64_t, int64_t, float*);
};

template <int Rows, int Cols, auto Run, auto RowLines = nullptr, auto ColumnLines = nullptr>
constexpr Tile tileOf() {
  return {Rows, Cols, Run, &packA<Rows, RowLines>, &packB<Cols, ColumnLines>};
}

Tile tileFor(OwnIsa isa) {
  switch (isa) {
    case OwnIsa::avx512: return tileOf<avx512::kRows, avx512::kCols, &avx512::tile, &avx512::transposeLines<avx512::kRows, avx512::kRows>,
                                          &avx512::transposeLines<avx512::kCols, avx512::kCols>>();
    case OwnIsa::avx2: return tileOf<avx2::kRows, avx2::kCols, &avx2::tile, &avx2::transposeLines<avx2::kRows, avx2::kRows>,
                                        &avx2::transposeLines<avx2::kCols, avx2::kCols>>();
    case OwnIsa::portable: break;
  }
  return tileOf<portable::kRows, portable::kCols, &portable::tile>();
}

// Asks for the rows of C of the tile after (ip, jp) in rowBlock's order, so that they are in L1
// when it starts: a tile loads its part of C first (the sum so far) and stores it last, and where
// C is larger than L2 (a weight gradient's sum of 2048 terms in 8 slices reads and writes all of
// C 8 times) its loads waited on L3 or memory (bench_matmul on Zen 2, 2 threads, three rounds
// old and new alternating: M = 256, N = 1024, K = 2048 9.9-10.2 -> 9.3-9.7 ms, the head's three
// 2-3% less). The same arithmetic: only the loads' timing changes.
void prefetchNextTile(const GemmOperands& g, const Tile& t, const float* c, int64_t ib, int64_t rows, int64_t ip,
                      int64_t j0, int64_t cols, int64_t jp) {
  const bool down = ip + t.rows < rows;
  const int64_t nip = down ? ip + t.rows : 0, njp = down ? jp : jp + t.cols;
  if (njp >= cols) return;
  const int64_t last = std::min<int64_t>(t.cols, cols - njp) - 1;
  for (int64_t r = 0; r < t.rows && nip + r < rows; ++r) {
    const float* line = c + (ib + nip + r) * g.n + j0 + njp;
    _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(line + last), _MM_HINT_T0);
  }
}

// The tiles of A's packed row block [ib, ib + rows) against B's packed columns [j0, j0 + cols),
// terms [p0, p0 + kc), into C (batch entry c) on the calling thread.
void rowBlock(const GemmOperands& g, const Tile& t, const float* a, float* c, int64_t ib, int64_t rows, int64_t p0,
              int64_t kc, int64_t j0, int64_t cols, const float* bp) {
  float* ap = threadScratch(0, kMostRows * kDepth);
  float edge[kMostTileFloats] = {};
  const bool accumulate = p0 > 0;
  t.packA(g, a, ib, rows, p0, kc, ap);
  for (int64_t jp = 0; jp < cols; jp += t.cols)
    for (int64_t ip = 0; ip < rows; ip += t.rows) {
      float* to = c + (ib + ip) * g.n + j0 + jp;
      const float *panelA = ap + ip * kc, *panelB = bp + jp * kc;
      if (ip + t.rows <= rows && jp + t.cols <= cols) {
        prefetchNextTile(g, t, c, ib, rows, ip, j0, cols, jp);
        t.run(kc, panelA, panelB, to, g.n, accumulate);
        continue;
      }
      // A tile past the block's edge runs on `edge` (t.cols apart); its live part is copied.
      const int64_t liveRows = std::min<int64_t>(t.rows, rows - ip), liveCols = std::min<int64_t>(t.cols, cols - jp);
      if (accumulate)
        for (int64_t r = 0; r < liveRows; ++r) std::copy_n(to + r * g.n, liveCols, edge + r * t.cols);
      t.run(kc, panelA, panelB, edge, t.cols, accumulate);
      for (int64_t r = 0; r < liveRows; ++r) std::copy_n(edge + r * t.cols, liveCols, to + r * g.n);
    }
}

// Rows [i0, i1) of batch entry c once every slice is in: zeros for an empty sum, then the bias.
void finishRows(const GemmOperands& g, float* c, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    float* row = c + i * g.n;
    if (g.k == 0) std::fill(row, row + g.n, 0.0f);
    if (g.bias)
      for (int64_t j = 0; j < g.n; ++j) row[j] = row[j] + g.bias[j];
  }
}

// Runs f, keeping the first exception (the scratch's allocation) for the caller's thread: none
// may leave an OpenMP region.
template <typename F>
void guarded(std::exception_ptr& failure, F f) {
  try {
    f();
  } catch (...) {
#pragma omp critical(spmd_own_gemm_failure)
    if (!failure) failure = std::current_exception();
  }
}

// Many batch entries (attention's heads): each task a batch entry's whole product, on one thread.
void perEntry(const GemmOperands& g, const Tile& t, int64_t colBlock, std::exception_ptr& failure) {
#pragma omp parallel for schedule(dynamic)
  for (int64_t s = 0; s < g.batch; ++s)
    guarded(failure, [&] {
      const float *a = g.a + s * g.aBatch, *b = g.b + s * g.bBatch;
      float* c = g.c + s * g.m * g.n;
      float* bp = threadScratch(1, roundUp(colBlock, t.cols) * kDepth);
      for (int64_t j0 = 0; j0 < g.n; j0 += colBlock)
        for (int64_t p0 = 0; p0 < g.k; p0 += kDepth) {
          const int64_t cols = std::min(colBlock, g.n - j0), kc = std::min(kDepth, g.k - p0);
          t.packB(g, b, p0, kc, j0, cols, bp);
          for (int64_t ib = 0; ib < g.m; ib += kMostRows)
            rowBlock(g, t, a, c, ib, std::min(kMostRows, g.m - ib), p0, kc, j0, cols, bp);
        }
      finishRows(g, c, 0, g.m);
    });
}

// One batch entry on the whole pool, BLIS's way: per column block and slice the threads pack B's
// panels into one shared buffer, then take A's row blocks in turn (dynamically: a thread slowed
// by a neighbour takes fewer), each block's tiles on one thread.
void shared(const GemmOperands& g, const Tile& t, int64_t s, int64_t colBlock, std::exception_ptr& failure) {
  const float *a = g.a + s * g.aBatch, *b = g.b + s * g.bBatch;
  float* c = g.c + s * g.m * g.n;
  float* bp = threadScratch(2, roundUp(colBlock, t.cols) * kDepth);  // the caller's: every thread reads it
  const int64_t rowBlocks = ceilDiv(g.m, kMostRows);
#pragma omp parallel
  {
    for (int64_t j0 = 0; j0 < g.n; j0 += colBlock)
      for (int64_t p0 = 0; p0 < g.k; p0 += kDepth) {
        const int64_t cols = std::min(colBlock, g.n - j0), kc = std::min(kDepth, g.k - p0);
#pragma omp for schedule(static)
        for (int64_t jp = 0; jp < cols; jp += t.cols)
          t.packB(g, b, p0, kc, j0 + jp, std::min<int64_t>(t.cols, cols - jp), bp + jp * kc);
#pragma omp for schedule(dynamic)
        for (int64_t r = 0; r < rowBlocks; ++r)
          guarded(failure, [&] {
            const int64_t ib = r * kMostRows;
            rowBlock(g, t, a, c, ib, std::min(kMostRows, g.m - ib), p0, kc, j0, cols, bp);
          });
      }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rowBlocks; ++r) finishRows(g, c, r * kMostRows, std::min(g.m, (r + 1) * kMostRows));
  }
}

}  // namespace

void ownGemm(const GemmOperands& g) {
  if (g.batch <= 0 || g.m <= 0 || g.n <= 0) return;
  const OwnIsa isa = ownIsa();
  markOwnIsaRun(isa);
  const Tile t = tileFor(isa);
  const int64_t colBlock = roundUp(ceilDiv(g.n, ceilDiv(g.n, kMostCols)), t.cols);
  std::exception_ptr failure;
  if (g.batch >= 2 * omp_get_max_threads()) {
    perEntry(g, t, colBlock, failure);
  } else {
    for (int64_t s = 0; s < g.batch && !failure; ++s) shared(g, t, s, colBlock, failure);
  }
  if (failure) std::rethrow_exception(failure);
}

namespace own_gemm {

bool runs(const KernelCall& call) { return call.in[0].dtype == DType::f32 && cpuOwnIsa() != OwnIsa::portable; }

bool pays(const KernelCall&) { return cpuOwnIsa() == OwnIsa::avx2; }

void matmul(KernelCall& call) {
  const TensorView &a = call.in[0], &b = call.in[1], &c = call.out[0];
  const auto& attrs = attrsOf<MatmulAttrs>(call.step);
  const size_t r = c.rank() - 2;  // batched: [B, M, N]
  GemmOperands g;
  g.batch = r ? c.dim(0) : 1;
  g.m = c.dim(r);
  g.n = c.dim(r + 1);
  g.k = attrs.transpose_lhs ? a.dim(r) : a.dim(r + 1);
  g.a = a.as<float>();
  g.aBatch = g.m * g.k;
  g.aRow = attrs.transpose_lhs ? 1 : g.k;
  g.aCol = attrs.transpose_lhs ? g.m : 1;
  g.b = b.as<float>();
  g.bBatch = g.k * g.n;
  g.bRow = attrs.transpose_rhs ? 1 : g.n;
  g.bCol = attrs.transpose_rhs ? g.k : 1;
  g.bias = call.in.size() > 2 ? call.in[2].as<float>() : nullptr;
  g.c = c.as<float>();
  ownGemm(g);
}

}  // namespace own_gemm
}  // namespace spmd::runtime::cpu
