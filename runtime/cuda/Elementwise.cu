// CUDA elementwise, shape, reduction, loss, pooling, softmax, random, embedding, convert, slice, pad,
// concatenate and select kernels: the shared kernel code
// (runtime/cuda/kernels/) compiled by nvcc and launched through CudaApi.
#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/kernels/Elementwise.h"
#include "runtime/cuda/kernels/Convert.h"
#include "runtime/cuda/kernels/Embedding.h"
#include "runtime/cuda/kernels/Loss.h"
#include "runtime/cuda/kernels/Pool.h"
#include "runtime/cuda/kernels/Random.h"
#include "runtime/cuda/kernels/Slice.h"
#include "runtime/cuda/kernels/Reduce.h"
#include "runtime/cuda/kernels/Shape.h"
#include "runtime/cuda/kernels/Softmax.h"

namespace spmd::runtime::cuda {

#define SPMD_ELEMENTWISE(name, Functor, ...) \
  void name(KernelCall& call) { gpu::elementwise<CudaApi, ew::Functor>(call); }
SPMD_ELEMENTWISE_OPS(SPMD_ELEMENTWISE)
#undef SPMD_ELEMENTWISE

#define SPMD_SHARED(name) \
  void name(KernelCall& call) { gpu::name<CudaApi>(call); }
SPMD_GPU_SHAPE_OPS(SPMD_SHARED)
SPMD_GPU_REDUCE_OPS(SPMD_SHARED)
SPMD_GPU_LOSS_OPS(SPMD_SHARED)
SPMD_GPU_POOL_OPS(SPMD_SHARED)
SPMD_GPU_SOFTMAX_OPS(SPMD_SHARED)
SPMD_GPU_RANDOM_OPS(SPMD_SHARED)
SPMD_GPU_EMBEDDING_OPS(SPMD_SHARED)
SPMD_GPU_CONVERT_OPS(SPMD_SHARED)
SPMD_GPU_SLICE_OPS(SPMD_SHARED)
#undef SPMD_SHARED

}  // namespace spmd::runtime::cuda
