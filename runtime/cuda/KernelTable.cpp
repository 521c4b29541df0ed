// The table of CUDA kernels, by op name.
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime {
namespace cuda {

// CUDA keeps every tensor plain (CudaDevice::channelBlock() is 0, and the executor refuses a
// program with blocked buffers), so no compiled program reaches this.
void relayout(KernelCall& call) {
  throw Error("relayout (" + call.step.where() + "): the cuda backend keeps every tensor plain; "
              "this program was compiled for the CPU backend's blocked layouts");
}

}  // namespace cuda

const KernelTable& cudaKernels() {
  static const KernelTable table = {
#define SPMD_TABLE_ENTRY(name, ...) {#name, &cuda::name},
      SPMD_KERNEL_OPS(SPMD_TABLE_ENTRY)
#undef SPMD_TABLE_ENTRY
  };
  return table;
}

}  // namespace spmd::runtime
