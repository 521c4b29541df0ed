// CUDA collectives for replicas in one process (cuda:0*N, several replicas on one GPU, which
// NCCL refuses): the shared pointer-exchange protocol of runtime/cuda/kernels/Collectives.h,
// compiled by nvcc and launched through CudaApi.
#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/kernels/Collectives.h"

namespace spmd::runtime::cuda {

#define SPMD_SHARED(name) \
  void name(KernelCall& call) { gpu::name<CudaApi>(call); }
SPMD_GPU_COLLECTIVE_OPS(SPMD_SHARED)
#undef SPMD_SHARED

}  // namespace spmd::runtime::cuda
