// oneDNN's kernels with bits that do not depend on the thread count: the batch (a matmul's rows)
// is cut into slices by a rule of the shapes alone, each slice runs a one-thread oneDNN
// primitive on the OpenMP pool, and a filter gradient sums its slices' partial gradients in slice
// order. oneDNN's own threading splits reductions by thread (a backward-weights sum differs
// between 1 and 2 threads); a one-thread primitive on the same slice gives the same bits whatever
// pool it runs on. The variants SPMD_THREAD_INVARIANT=1 leaves where no kernel of ours runs
// (runtime/cpu/CpuVariants.cpp, cpu/Dense.cpp).
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::sliced {

// f32 and bf16 (bf16 where oneDNN has bf16 kernels: the callers widen otherwise).
bool runs(const KernelCall& call);
void conv2d(KernelCall& call);
void backwardData(KernelCall& call);
void backwardFilter(KernelCall& call);
// The matmul step (transposes, batching and bias as cpu/Dense.cpp's).
void matmul(KernelCall& call);

}  // namespace spmd::runtime::cpu::sliced
