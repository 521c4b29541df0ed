// Reference kernels: the plainest correct loops (double accumulation), one per op, same
// signature as every backend kernel. Tests use them as the oracle; CPU kernels without an f64
// library path call them for f64.
#pragma once

#include "runtime/Kernel.h"

namespace spmd::runtime::reference {

#define SPMD_REFERENCE_KERNELS(X)                                                             \
  X(conv2d) X(batch_norm_train) X(batch_norm_infer) X(add) X(sub) X(mul) X(div) X(max) X(neg) \
  X(exp) X(log) X(sqrt) X(relu) X(broadcast_in_dim) X(reshape) X(transpose) X(reduce_sum)     \
  X(reduce_mean) X(reduce_max) X(argmax) X(matmul) X(softmax_cross_entropy)

#define SPMD_DECLARE_KERNEL(name) void name(KernelCall& call);
SPMD_REFERENCE_KERNELS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

}  // namespace spmd::runtime::reference
