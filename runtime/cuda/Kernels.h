// Declarations of the CUDA backend's kernels (one per op, the dialect's names), each a host
// function that enqueues work on the device's stream.
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cuda {

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_KERNEL_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

}  // namespace spmd::runtime::cuda
