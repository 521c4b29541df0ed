// oneDNN's kernels with bits that do not depend on the thread count: the batch (a matmul's rows)
// is cut into slices by a rule of the shapes alone (at most 16, each of at least about 8M
// multiply-adds: a small step is one slice on one thread), each slice runs a one-thread oneDNN
// primitive on the OpenMP pool, and a filter gradient sums its slices' partial gradients in slice
// order. oneDNN's own threading splits reductions by thread (a backward-weights sum differs
// between 1 and 2 threads); a one-thread primitive on the same slice gives the same bits whatever
// pool it runs on. The variants SPMD_THREAD_INVARIANT=1 leaves where no kernel of ours runs
// (runtime/cpu/CpuVariants.cpp, cpu/Dense.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::sliced {

// dst = src x weights (+ bias; dst += with `accumulate`) for 2-D or batched descriptors (plain,
// any strides: a transpose is a stride), as one-thread oneDNN matmuls on slices of dst's
// outermost dimension (its rows, or its batch with src's and weights' batch alongside): each
// result element is one slice's own sum, whatever the threads. Run as Prepared::run is.
class Gemm {
 public:
  Gemm() = default;
  Gemm(const dnnl::memory::desc& src, const dnnl::memory::desc& weights, const dnnl::memory::desc& dst,
       bool accumulate = false, const dnnl::memory::desc* bias = nullptr);
  // Binds DNNL_ARG_SRC, _WEIGHTS, _DST (and _BIAS) to these pointers and runs every slice.
  void run(std::initializer_list<std::pair<int, void*>> pointers);

 private:
  struct Plan;
  std::shared_ptr<Plan> plan_;
};

// f32 and bf16 (bf16 where oneDNN has bf16 kernels: the callers widen otherwise).
bool runs(const KernelCall& call);
void conv2d(KernelCall& call);
void backwardData(KernelCall& call);
void backwardFilter(KernelCall& call);
// The matmul step (transposes, batching and bias as cpu/Dense.cpp's).
void matmul(KernelCall& call);
// Tests: the least multiply-adds a slice is given (default 8M), for steps made from now on; 0
// restores the default. 1 cuts even small test shapes into the most slices.
void setSliceWork(int64_t multiplyAdds);
// Tests: how many of the kernels made so far run oneDNN's reference loops (where none of its own
// takes the operands' layouts, even in its preferred channel block: none is known).
int64_t referenceKernels();

}  // namespace spmd::runtime::cpu::sliced
