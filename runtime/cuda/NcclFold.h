// The device fold of NCCL's exact all-reduce (runtime/cuda/Nccl.cpp): out[i] = the fold tree's
// root (runtime/device/Fold.h) over rows[0][i], ..., rows[n-1][i], rows stored one after
// another, `count` elements each, as the pointer-exchange kernels fold (kernels/Collectives.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/base/DType.h"
#include "runtime/device/Communicator.h"

namespace spmd::runtime::cuda {

void foldRows(const void* rows, int n, int64_t count, DType dtype, Reduction op, void* out, cudaStream_t stream);

}  // namespace spmd::runtime::cuda
