// Declarations of the CPU backend's kernels (one per op, same names as the dialect's ops).
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu {

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_KERNEL_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

}  // namespace spmd::runtime::cpu
