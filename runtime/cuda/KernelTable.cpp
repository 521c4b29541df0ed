// The table of CUDA kernels, by op name.
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime {

const KernelTable& cudaKernels() {
  static const KernelTable table = {
#define SPMD_TABLE_ENTRY(name, ...) {#name, &cuda::name},
      SPMD_KERNEL_OPS(SPMD_TABLE_ENTRY)
#undef SPMD_TABLE_ENTRY
  };
  return table;
}

}  // namespace spmd::runtime
