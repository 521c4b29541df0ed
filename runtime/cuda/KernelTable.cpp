// The CUDA backend's kernel table: the kernel library compiled by nvcc, then the backend's own
// kernels (runtime/cuda/Kernels.h) over it.
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime {

const KernelTable& cudaKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    cuda::addLibrary(t);
#define SPMD_OWN(name, source) t[#name] = Kernel{&cuda::name, source};
    SPMD_CUDA_OPS(SPMD_OWN)
#undef SPMD_OWN
    return t;
  }();
  return table;
}

}  // namespace spmd::runtime
