// CPU data movement: broadcast_in_dim and transpose as strided gathers over the output (inner
// dimension as a tight loop), reshape as one memcpy, slice, concatenate and pad as memcpys of the
// contiguous runs a box has in the larger tensor (pad's zeros one memset first).
#include <cstring>
#include <vector>

#include "runtime/cpu/Kernels.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

// y[index] = x[sum(index[d] * sourceStrides[d])] for every output index, element size `size`.
template <typename E>
void gather(const TensorView& x, const TensorView& y, const Shape& sourceStrides) {
  const E* src = static_cast<const E*>(x.data);
  E* dst = static_cast<E*>(y.data);
  size_t rank = y.rank();
  if (rank == 0) { dst[0] = src[0]; return; }
  int64_t inner = y.dim(rank - 1), innerStride = sourceStrides[rank - 1];
  int64_t rows = y.numel() / std::max<int64_t>(inner, 1);
  std::vector<int64_t> index(rank, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0;
    for (size_t d = 0; d + 1 < rank; ++d) base += index[d] * sourceStrides[d];
    for (int64_t j = 0; j < inner; ++j) dst[row * inner + j] = src[base + j * innerStride];
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
      if (++index[d] < y.dim(d)) break;
      index[d] = 0;
    }
  }
}

void gatherAny(const TensorView& x, const TensorView& y, const Shape& sourceStrides) {
  if (dtypeSize(x.dtype) == 8) gather<uint64_t>(x, y, sourceStrides);
  else gather<uint32_t>(x, y, sourceStrides);
}

// The box `box` (a tensor of its own) sits at `offset` in the row-major tensor `whole`: copies it
// out of `whole` (slice) or into it (concatenate), one memcpy per contiguous run: the trailing
// dims the box spans whole, and the one before them in part.
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
  std::vector<int64_t> index(first, 0);
  auto* boxBytes = static_cast<std::byte*>(box.data);
  auto* wholeBytes = static_cast<std::byte*>(whole.data);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t at = rank == 0 ? 0 : offset[first] * strides[first];
    for (size_t d = 0; d < first; ++d) at += (index[d] + offset[d]) * strides[d];
    std::byte* inBox = boxBytes + size_t(r * run) * e;
    std::byte* inWhole = wholeBytes + size_t(at) * e;
    if (intoWhole) std::memcpy(inWhole, inBox, size_t(run) * e);
    else std::memcpy(inBox, inWhole, size_t(run) * e);
    for (int64_t d = int64_t(first) - 1; d >= 0; --d) {
      if (++index[size_t(d)] < box.dim(size_t(d))) break;
      index[size_t(d)] = 0;
    }
  }
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
  std::memset(y.data, 0, size_t(y.numel()) * dtypeSize(y.dtype));
  copyBox(x, y, attrsOf<PadAttrs>(call.step).low, true);
}

void reshape(KernelCall& call) {
  if (call.out[0].data == call.in[0].data) return;  // the memory plan put the result in place
  std::memcpy(call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(call.in[0].dtype));
}

void transpose(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& perm = attrsOf<PermAttrs>(call.step).perm;
  Shape inStrides = rowMajorStrides(x.shape), strides(y.rank());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = inStrides[perm[i]];
  gatherAny(x, y, strides);
}

}  // namespace spmd::runtime::cpu
