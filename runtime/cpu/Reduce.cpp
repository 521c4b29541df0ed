// CPU reductions (sum, mean, max over a set of axes), accumulating in double.
//
// Adjacent dims that are both reduced or both kept are merged first, so the innermost loop runs
// over a whole contiguous stretch (a conv-bias gradient [N, C, H, W] over (0, 2, 3) becomes
// [N, C, H*W]). The input's rows are cut into chunks by a rule that depends only on the shape and
// run in parallel on the OpenMP pool oneDNN uses. Chunks of an outermost kept dim write disjoint
// output slots; otherwise each chunk accumulates its own partial result and the partials are
// combined in chunk order. Either way the result is the same bits for any number of threads.
#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

enum class Kind { sum, mean, max };

// Input elements per chunk, at least; and the most partial-result doubles all chunks may hold.
constexpr int64_t kChunkElements = 1 << 15;
constexpr int64_t kMaxChunks = 64, kMaxPartials = int64_t{1} << 22;

// `shape` with adjacent dims of the same kind (reduced or kept) merged; `reduced[d]` says which.
struct Merged {
  Shape dims;
  std::vector<bool> reduced;
};

Merged merge(const Shape& shape, const std::vector<int64_t>& axes) {
  Merged m;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool r = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (!m.dims.empty() && m.reduced.back() == r) m.dims.back() *= shape[d];
    else m.dims.push_back(shape[d]), m.reduced.push_back(r);
  }
  if (m.dims.empty()) m.dims.push_back(1), m.reduced.push_back(false);  // a scalar: one kept element
  return m;
}

// Accumulates rows [begin, end) of `src` (rows of `inner` elements, dims as in `m`) into `acc`.
template <Kind kind, typename T>
void accumulate(const T* src, const Merged& m, const Shape& outStride, int64_t inner, int64_t begin,
                int64_t end, double* acc) {
  const size_t rank = m.dims.size();
  const bool innerKept = !m.reduced.back();
  std::vector<int64_t> index(rank, 0);
  for (int64_t d = static_cast<int64_t>(rank) - 2, rest = begin; d >= 0; --d) {
    index[d] = rest % m.dims[d];
    rest /= m.dims[d];
  }
  for (int64_t row = begin; row < end; ++row) {
    int64_t slot = 0;
    for (size_t d = 0; d + 1 < rank; ++d) slot += index[d] * outStride[d];
    const T* line = src + row * inner;
    double* __restrict a = acc + slot;
    if constexpr (kind == Kind::max) {
      if (innerKept)
        for (int64_t j = 0; j < inner; ++j) a[j] = nanMax<double>(a[j], line[j]);
      else
        for (int64_t j = 0; j < inner; ++j) a[0] = nanMax<double>(a[0], line[j]);
    } else if (innerKept) {
      for (int64_t j = 0; j < inner; ++j) a[j] += line[j];
    } else {  // four running sums: independent adds instead of one long dependency chain
      double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t j = 0;
      for (; j + 4 <= inner; j += 4) s0 += line[j], s1 += line[j + 1], s2 += line[j + 2], s3 += line[j + 3];
      for (; j < inner; ++j) s0 += line[j];
      a[0] += (s0 + s1) + (s2 + s3);
    }
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++index[d] < m.dims[d]) break;
      index[d] = 0;
    }
  }
}

// The per-channel sums of one channel block of an nChw<B>c tensor, viewed as [N, blocks, hw, B]:
// its B sums held in registers (two sets, so consecutive adds do not wait on each other), the
// lanes vectorized for AVX-512 / AVX2 / baseline (OwnIsa.h; each lane's order fixed, so the
// same bits everywhere).
template <int B, typename T>
SPMD_ISA_BODY
void blockSums(const T* x, int64_t N, int64_t blocks, int64_t hw, int64_t cb, T* out) {
  double even[B] = {}, odd[B] = {};
  for (int64_t n = 0; n < N; ++n) {
    const T* plane = x + (n * blocks + cb) * hw * B;
    int64_t i = 0;
    for (; i + 2 <= hw; i += 2)
      for (int j = 0; j < B; ++j) even[j] += plane[i * B + j], odd[j] += plane[(i + 1) * B + j];
    if (i < hw)
      for (int j = 0; j < B; ++j) even[j] += plane[i * B + j];
  }
  for (int j = 0; j < B; ++j) out[cb * B + j] = static_cast<T>(even[j] + odd[j]);
}

// One channel block per task.
template <int B, typename T>
void blockedChannelSums(const T* x, int64_t N, int64_t blocks, int64_t hw, T* out) {
#pragma omp parallel for if (N * blocks * hw * B >= kChunkElements) schedule(static)
  for (int64_t cb = 0; cb < blocks; ++cb) onOwnIsa<blockSums<B, T>>(x, N, blocks, hw, cb, out);
}

template <Kind kind>
void reduce(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& x = call.in[0];
    const TensorView& y = call.out[0];
    const std::vector<int64_t>& axes = attrsOf<AxesAttrs>(call.step).axes;
    Merged m;
    if (int64_t block = channelBlock(x.layout)) {
      // A per-channel reduction of nChw<B>c (the only blocked one the compiler assigns, see
      // runtime/program/Layouts.h): the buffer is row-major [N, C/B, H*W, B], and keeping dims 1
      // and 3 lists the channels in order.
      if (axes != std::vector<int64_t>{0, 2, 3})
        throw Error("reduce over axes " + shapeString(axes) + " of a " + std::string(x.layout) +
                    " tensor: only the per-channel sum over (0, 2, 3) reads a blocked layout");
      if (kind == Kind::sum && (block == 8 || block == 16)) {
        const int64_t blocks = x.dim(1) / block, hw = x.dim(2) * x.dim(3);
        if (block == 8) blockedChannelSums<8>(x.as<T>(), x.dim(0), blocks, hw, y.as<T>());
        else blockedChannelSums<16>(x.as<T>(), x.dim(0), blocks, hw, y.as<T>());
        return;
      }
      m = merge({x.dim(0), x.dim(1) / block, x.dim(2) * x.dim(3), block}, {0, 2});
    } else {
      m = merge(Shape(x.shape.begin(), x.shape.end()), axes);
    }
    const double init = kind == Kind::max ? -std::numeric_limits<double>::infinity() : 0.0;
    const int64_t ny = y.numel(), nx = x.numel();
    T* out = y.as<T>();
    if (nx == 0) {  // nothing to reduce: the sum's zero, the max's -inf (a mean of nothing is NaN)
      for (int64_t i = 0; i < ny; ++i)
        out[i] = static_cast<T>(kind == Kind::mean ? std::numeric_limits<double>::quiet_NaN() : init);
      return;
    }
    // outStride[d]: how far the output slot moves when merged dim d advances (0 if reduced).
    const size_t rank = m.dims.size();
    Shape outStride(rank, 0);
    for (int64_t d = static_cast<int64_t>(rank) - 1, stride = 1; d >= 0; --d)
      if (!m.reduced[d]) outStride[d] = stride, stride *= m.dims[d];
    const int64_t inner = m.dims.back(), rows = nx / inner;
    // When the outermost merged dim is kept, chunks of it write disjoint output slots and share
    // one result; otherwise each chunk of rows has its own partial result.
    // (A reduction over no axes merges to one kept dim: a single row, copied.)
    const bool disjoint = !m.reduced[0] && rank > 1;
    const int64_t units = disjoint ? m.dims[0] : rows, rowsPerUnit = rows / units;
    int64_t chunks = std::clamp<int64_t>(nx / kChunkElements, 1, std::min(kMaxChunks, units));
    while (!disjoint && chunks > 1 && chunks * ny > kMaxPartials) chunks /= 2;
    const int64_t parts = disjoint ? 1 : chunks;
    std::vector<double> partial(static_cast<size_t>(parts * ny), init);
    const T* src = x.as<T>();
#pragma omp parallel for if (chunks > 1) schedule(static)
    for (int64_t k = 0; k < chunks; ++k)
      accumulate<kind>(src, m, outStride, inner, rowsPerUnit * (units * k / chunks),
                       rowsPerUnit * (units * (k + 1) / chunks), partial.data() + (disjoint ? 0 : k * ny));
    const double scale = kind == Kind::mean ? double(ny) / double(nx) : 1.0;
#pragma omp parallel for if (ny * parts >= kChunkElements) schedule(static)
    for (int64_t i = 0; i < ny; ++i) {
      double v = partial[i];
      for (int64_t k = 1; k < parts; ++k)
        v = kind == Kind::max ? nanMax<double>(v, partial[k * ny + i]) : v + partial[k * ny + i];
      out[i] = static_cast<T>(v * scale);
    }
  });
}

}  // namespace

void reduce_sum(KernelCall& call) { reduce<Kind::sum>(call); }
void reduce_mean(KernelCall& call) { reduce<Kind::mean>(call); }
void reduce_max(KernelCall& call) { reduce<Kind::max>(call); }

}  // namespace spmd::runtime::cpu
