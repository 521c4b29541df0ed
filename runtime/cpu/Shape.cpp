// CPU data movement: broadcast_in_dim and transpose as strided gathers over the output (inner
// dimension as a tight loop), reshape as one memcpy.
#include <cstring>
#include <vector>

#include "runtime/cpu/Kernels.h"

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

}  // namespace

void broadcast_in_dim(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& dims = call.step.ints("dims");
  Shape inStrides = rowMajorStrides(x.shape), strides(y.rank(), 0);
  for (size_t i = 0; i < dims.size(); ++i)
    if (x.dim(i) != 1) strides[dims[i]] = inStrides[i];
  gatherAny(x, y, strides);
}

void reshape(KernelCall& call) {
  std::memcpy(call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(call.in[0].dtype));
}

void transpose(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& perm = call.step.ints("perm");
  Shape inStrides = rowMajorStrides(x.shape), strides(y.rank());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = inStrides[perm[i]];
  gatherAny(x, y, strides);
}

}  // namespace spmd::runtime::cpu
