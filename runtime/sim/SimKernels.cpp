// The simulator's kernel table: the kernel library through SimApi (the CUDA backend's own kernel
// code, run on the device's stream thread), then, for the ops the GPU hands to a library (cuDNN
// convolutions, cuBLAS matmul) or to code that needs a real GPU (block-wide BatchNorm reductions,
// NVRTC-compiled fused kernels), the CPU backend's kernel queued on the stream thread, as the GPU
// would run its library call on its stream.
#include "runtime/cpu/CpuDevice.h"
#include "runtime/kernels/Library.h"
#include "runtime/sim/SimApi.h"
namespace spmd::runtime::sim {
namespace {

// The CPU kernel of the call's op, queued with copies of the call's views.
template <const char* Op>
void onStream(KernelCall& call) {
  static const KernelFn cpu = cpuKernels().at(Op).fn;
  std::vector<TensorView> in(call.in.begin(), call.in.end()), out(call.out.begin(), call.out.end());
  const Step* step = &call.step;
  std::shared_ptr<void>* cache = &call.cache;  // the executor's slot for this step outlives the run
  deviceOf(call).enqueue(stepName(call), [in = std::move(in), out = std::move(out), step, cache] {
    KernelCall cpuCall{*step, in, out, *cache, nullptr, nullptr};
    cpu(cpuCall);
  });
}

#define SPMD_SIM_CPU_OPS(X)                                                                          \
  X(conv2d) X(conv2d_backward_data) X(conv2d_backward_filter) X(matmul) X(batch_norm_train)         \
  X(batch_norm_infer) X(batch_norm_train_backward) X(relayout) X(fused)
#define SPMD_OP_NAME(name) constexpr char name##Name[] = #name;
SPMD_SIM_CPU_OPS(SPMD_OP_NAME)
#undef SPMD_OP_NAME

}  // namespace
}  // namespace spmd::runtime::sim

namespace spmd::runtime {

const KernelTable& simKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    kernels::addLibrary<sim::SimApi>(t, "kernel library on the stream thread (runtime/kernels)");
#define SPMD_ON_STREAM(name) t[#name] = Kernel{&sim::onStream<sim::name##Name>, "the CPU backend's kernel on the stream thread"};
    SPMD_SIM_CPU_OPS(SPMD_ON_STREAM)
#undef SPMD_ON_STREAM
    return t;
  }();
  return table;
}

}  // namespace spmd::runtime
