// Reference data-movement kernels (any dtype, element by element): broadcast_in_dim, reshape,
// transpose.

#include "runtime/base/Index.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
void broadcast_in_dim(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& dims = attrsOf<DimsAttrs>(call.step).dims;
  Shape strides = rowMajorStrides(x.shape);
  forEachIndex(y.shape, [&](std::span<const int64_t> index, int64_t linear) {
    int64_t from = 0;
    for (size_t i = 0; i < dims.size(); ++i)
      if (x.dim(i) != 1) from += index[dims[i]] * strides[i];
    copyElement(y, linear, x, from);
  });
}

void reshape(KernelCall& call) {
  if (call.out[0].data == call.in[0].data) return;  // the memory plan put the result in place
  for (int64_t i = 0; i < call.in[0].numel(); ++i) copyElement(call.out[0], i, call.in[0], i);
}

void transpose(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const auto& perm = attrsOf<PermAttrs>(call.step).perm;
  Shape strides = rowMajorStrides(x.shape);
  forEachIndex(y.shape, [&](std::span<const int64_t> index, int64_t linear) {
    int64_t from = 0;
    for (size_t i = 0; i < perm.size(); ++i) from += index[i] * strides[perm[i]];
    copyElement(y, linear, x, from);
  });
}

}  // namespace spmd::runtime::reference
