// Reference kernels: the plainest correct loops (double accumulation), one per op, same
// signature as every backend kernel. Tests use them as the oracle; CPU kernels without an f64
// library path call them for f64.
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::reference {

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_PROGRAM_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

}  // namespace spmd::runtime::reference
