// The simulator's kernel table. Elementwise, shape, reduction, loss, pooling, softmax, random,
// embedding, convert, slice/pad/concatenate/select and collective ops run the CUDA backend's own kernel code (runtime/cuda/kernels/) through SimApi;
// the ops the GPU hands to a library (cuDNN convolutions, cuBLAS matmul) or to code that needs a
// real GPU (block-wide BatchNorm reductions, NVRTC-compiled fused kernels) run the CPU backend's
// kernel on the stream thread instead, as the GPU would run its library call on its stream.
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cuda/kernels/Collectives.h"
#include "runtime/cuda/kernels/Elementwise.h"
#include "runtime/cuda/kernels/Convert.h"
#include "runtime/cuda/kernels/Embedding.h"
#include "runtime/cuda/kernels/Loss.h"
#include "runtime/cuda/kernels/Pool.h"
#include "runtime/cuda/kernels/Random.h"
#include "runtime/cuda/kernels/Slice.h"
#include "runtime/cuda/kernels/Reduce.h"
#include "runtime/cuda/kernels/Shape.h"
#include "runtime/cuda/kernels/Softmax.h"
#include "runtime/sim/SimApi.h"

namespace spmd::runtime::sim {
namespace {

// The CPU kernel of the call's op, queued with copies of the call's views.
template <const char* Op>
void onStream(KernelCall& call) {
  static const KernelFn cpu = cpuKernels().at(Op);
  std::vector<TensorView> in(call.in.begin(), call.in.end()), out(call.out.begin(), call.out.end());
  const Step* step = &call.step;
  std::shared_ptr<void>* cache = &call.cache;  // the executor's slot for this step outlives the run
  deviceOf(call).enqueue(stepName(call), [in = std::move(in), out = std::move(out), step, cache] {
    KernelCall cpuCall{*step, in, out, *cache, nullptr, nullptr};
    cpu(cpuCall);
  });
}

#define SPMD_LIBRARY_OPS(X)                                                                          \
  X(conv2d) X(conv2d_backward_data) X(conv2d_backward_filter) X(matmul) X(batch_norm_train)         \
  X(batch_norm_infer) X(batch_norm_train_backward) X(relayout) X(fused)
#define SPMD_OP_NAME(name) constexpr char name##Name[] = #name;
SPMD_LIBRARY_OPS(SPMD_OP_NAME)
#undef SPMD_OP_NAME

}  // namespace
}  // namespace spmd::runtime::sim

namespace spmd::runtime {

const KernelTable& simKernels() {
  using sim::SimApi;
  static const KernelTable table = {
#define SPMD_ELEMENTWISE(name, Functor, ...) {#name, &gpu::elementwise<SimApi, ew::Functor>},
      SPMD_ELEMENTWISE_OPS(SPMD_ELEMENTWISE)
#undef SPMD_ELEMENTWISE
#define SPMD_SHARED(name) {#name, &gpu::name<SimApi>},
      SPMD_GPU_SHAPE_OPS(SPMD_SHARED) SPMD_GPU_REDUCE_OPS(SPMD_SHARED) SPMD_GPU_LOSS_OPS(SPMD_SHARED)
      SPMD_GPU_POOL_OPS(SPMD_SHARED) SPMD_GPU_SOFTMAX_OPS(SPMD_SHARED)
      SPMD_GPU_RANDOM_OPS(SPMD_SHARED) SPMD_GPU_EMBEDDING_OPS(SPMD_SHARED)
      SPMD_GPU_CONVERT_OPS(SPMD_SHARED) SPMD_GPU_SLICE_OPS(SPMD_SHARED)
      SPMD_GPU_COLLECTIVE_OPS(SPMD_SHARED)
#undef SPMD_SHARED
#define SPMD_LIBRARY(name) {#name, &sim::onStream<sim::name##Name>},
      SPMD_LIBRARY_OPS(SPMD_LIBRARY)
#undef SPMD_LIBRARY
  };
  return table;
}

}  // namespace spmd::runtime
