// The CPU backend's kernel table, by op name.
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/Kernels.h"

namespace spmd::runtime {

const KernelTable& cpuKernels() {
  static const KernelTable table = {
#define SPMD_TABLE_ENTRY(name, ...) {#name, &cpu::name},
      SPMD_KERNEL_OPS(SPMD_TABLE_ENTRY)
#undef SPMD_TABLE_ENTRY
  };
  return table;
}

}  // namespace spmd::runtime
