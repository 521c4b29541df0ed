// The kernel library (runtime/kernels/) compiled by nvcc and launched through CudaApi: every op
// the CUDA backend does not hand to cuDNN, cuBLAS or NVRTC, collectives of replicas sharing a
// process included (NCCL serves the rest through the communicator).
#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/Kernels.h"
#include "runtime/kernels/Library.h"

namespace spmd::runtime::cuda {

void addLibrary(KernelTable& table) {
  kernels::addLibrary<CudaApi>(table, "kernel library on the GPU (runtime/kernels)");
  kernels::addBlockLibrary<CudaApi>(table, "kernel library's block kernels on the GPU (runtime/kernels)");
}

}  // namespace spmd::runtime::cuda
