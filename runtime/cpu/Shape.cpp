// CPU data movement: broadcast_in_dim and transpose as strided gathers over the output (inner
// dimension as a tight loop), reshape as one memcpy, slice, concatenate and pad as memcpys of the
// contiguous runs a box has in the larger tensor (pad's zeros one memset first).
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "runtime/base/CopyBytes.h"
#include "runtime/base/Error.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

// Data movement of at least this many bytes is split over the replica's OpenMP threads, each
// taking a contiguous share of the rows (gathers) or runs (box copies); a run longer than
// kPieceBytes is copied in pieces of about that size, so one long run is shared too.
constexpr size_t kParallelBytes = size_t(1) << 20;
constexpr size_t kPieceBytes = size_t(1) << 18;

// Calls body(begin, end) on a share [begin, end) of `count` items per OpenMP thread, or on all of
// them in this thread when `threaded` is false.
template <typename Body>
void shared(int64_t count, bool threaded, Body body) {
#pragma omp parallel if (threaded && count > 1)
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = count * t / threads, end = count * (t + 1) / threads;
    if (begin < end) body(begin, end);
  }
}

// Sets `index` (the leading dims of `dims`, row-major) to the multi-index of row `row`, and
// advances it by one row.
void indexOf(int64_t row, std::span<const int64_t> dims, std::vector<int64_t>& index) {
  for (int64_t d = int64_t(index.size()) - 1; d >= 0; --d) {
    index[size_t(d)] = row % dims[size_t(d)];
    row /= dims[size_t(d)];
  }
}
void advance(std::span<const int64_t> dims, std::vector<int64_t>& index) {
  for (int64_t d = int64_t(index.size()) - 1; d >= 0; --d) {
    if (++index[size_t(d)] < dims[size_t(d)]) return;
    index[size_t(d)] = 0;
  }
}

// y[index] = x[sum(index[d] * sourceStrides[d])] for every output index, element size `size`.
template <typename E>
void gather(const TensorView& x, const TensorView& y, const Shape& sourceStrides) {
  const E* src = static_cast<const E*>(x.data);
  E* dst = static_cast<E*>(y.data);
  size_t rank = y.rank();
  if (rank == 0) { dst[0] = src[0]; return; }
  int64_t inner = y.dim(rank - 1), innerStride = sourceStrides[rank - 1];
  int64_t rows = y.numel() / std::max<int64_t>(inner, 1);
  shared(rows, size_t(y.numel()) * sizeof(E) >= kParallelBytes, [&](int64_t first, int64_t last) {
    std::vector<int64_t> index(rank - 1, 0);
    indexOf(first, y.shape, index);
    for (int64_t row = first; row < last; ++row, advance(y.shape, index)) {
      int64_t base = 0;
      for (size_t d = 0; d + 1 < rank; ++d) base += index[d] * sourceStrides[d];
      for (int64_t j = 0; j < inner; ++j) dst[row * inner + j] = src[base + j * innerStride];
    }
  });
}

void gatherAny(const TensorView& x, const TensorView& y, const Shape& sourceStrides) {
  switch (dtypeSize(x.dtype)) {
    case 8: return gather<uint64_t>(x, y, sourceStrides);
    case 4: return gather<uint32_t>(x, y, sourceStrides);
    case 2: return gather<uint16_t>(x, y, sourceStrides);  // bf16, moved as it is
    default: throw Error("the CPU's shape kernels move 2-, 4- or 8-byte elements, not " + std::to_string(dtypeSize(x.dtype)));
  }
}

// The box `box` (a tensor of its own) sits at `offset` in the row-major tensor `whole`: copies it
// out of `whole` (slice) or into it (concatenate, pad), one memcpy per contiguous run (or piece
// of one): the trailing dims the box spans whole, and the one before them in part.
void copyBox(const TensorView& box, const TensorView& whole, const std::vector<int64_t>& offset, bool intoWhole) {
  const size_t rank = box.rank(), e = dtypeSize(box.dtype);
  if (box.numel() == 0) return;
  size_t k = rank;  // dims [k, rank) are spanned whole
  while (k > 0 && box.dim(k - 1) == whole.dim(k - 1)) --k;
  const size_t first = k == 0 ? 0 : k - 1;  // the run's outermost dim
  int64_t run = 1;
  for (size_t d = first; d < rank; ++d) run *= box.dim(d);
  const Shape strides = rowMajorStrides(whole.shape);
  const int64_t runs = box.numel() / run;
  const size_t runBytes = size_t(run) * e;
  const int64_t pieces = std::max<int64_t>(1, int64_t(runBytes / kPieceBytes));
  const size_t pieceBytes = (runBytes + size_t(pieces) - 1) / size_t(pieces);
  auto* boxBytes = static_cast<std::byte*>(box.data);
  auto* wholeBytes = static_cast<std::byte*>(whole.data);
  shared(runs * pieces, size_t(runs) * runBytes >= kParallelBytes, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> index(first, 0);
    int64_t r = begin / pieces;
    indexOf(r, box.shape, index);
    for (int64_t item = begin; item < end; ++item) {
      if (item / pieces != r) ++r, advance(box.shape, index);
      const size_t from = size_t(item % pieces) * pieceBytes;
      if (from >= runBytes) continue;
      const size_t bytes = std::min(pieceBytes, runBytes - from);
      int64_t at = rank == 0 ? 0 : offset[first] * strides[first];
      for (size_t d = 0; d < first; ++d) at += (index[d] + offset[d]) * strides[d];
      std::byte* inBox = boxBytes + size_t(r * run) * e + from;
      std::byte* inWhole = wholeBytes + size_t(at) * e + from;
      if (intoWhole) std::memcpy(inWhole, inBox, bytes);
      else std::memcpy(inBox, inWhole, bytes);
    }
  });
}

}  // namespace

void broadcast_in_dim(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& dims = attrsOf<DimsAttrs>(call.step).dims;
  Shape inStrides = rowMajorStrides(x.shape), strides(y.rank(), 0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (x.dim(i) != 1) strides[dims[i]] = inStrides[i];
  gatherAny(x, y, strides);
}

void slice(KernelCall& call) { copyBox(call.out[0], call.in[0], attrsOf<SliceAttrs>(call.step).start, false); }

void concatenate(KernelCall& call) {
  const int64_t axis = attrsOf<AxisAttrs>(call.step).axis;
  int64_t at = 0;
  for (const TensorView& x : call.in) {
    std::vector<int64_t> offset(x.rank(), 0);
    offset[size_t(axis)] = at;
    at += x.dim(size_t(axis));
    copyBox(x, call.out[0], offset, true);
  }
}

void pad(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const size_t bytes = size_t(y.numel()) * dtypeSize(y.dtype);
  const int64_t pieces = int64_t((bytes + kPieceBytes - 1) / kPieceBytes);
  shared(pieces, bytes >= kParallelBytes, [&](int64_t begin, int64_t end) {
    const size_t from = size_t(begin) * kPieceBytes;
    std::memset(static_cast<std::byte*>(y.data) + from, 0, std::min(bytes, size_t(end) * kPieceBytes) - from);
  });
  copyBox(x, y, attrsOf<PadAttrs>(call.step).low, true);
}

void reshape(KernelCall& call) {
  if (call.out[0].data == call.in[0].data) return;  // the memory plan put the result in place
  copyBytes(call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(call.in[0].dtype));
}

void transpose(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& perm = attrsOf<PermAttrs>(call.step).perm;
  Shape inStrides = rowMajorStrides(x.shape), strides(y.rank());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = inStrides[perm[i]];
  gatherAny(x, y, strides);
}

}  // namespace spmd::runtime::cpu
