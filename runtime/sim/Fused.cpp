// The simulator's fused kernel: the CUDA backend's generated kernel (the text NVRTC compiles,
// runtime/kernels/FusedSource.h) built for the host (runtime/sim/HostKernels.h) on the step's
// first call and run on the stream thread with the CUDA backend's launch geometry, its
// (block, thread) pairs in a seeded random order.
#include <memory>
#include <vector>

#include "runtime/kernels/FusedSource.h"
#include "runtime/program/FusedBody.h"
#include "runtime/sim/Coverage.h"
#include "runtime/sim/HostKernels.h"
#include "runtime/sim/SimApi.h"

namespace spmd::runtime::sim {

namespace {

struct Compiled {
  HostLaunch launch;
  std::string source;
};

}  // namespace

void fused(KernelCall& call) {
  if (!call.cache) {
    FusedBody body = FusedBody::parse(call.step.text("body"));
    std::vector<std::vector<int64_t>> inputs;
    for (const TensorView& in : call.in) inputs.emplace_back(in.shape.begin(), in.shape.end());
    std::string source =
        kernels::fusedKernelSource(body, call.out[0].dtype, inputs, call.out[0].shape, call.out.size());
    call.cache = std::make_shared<Compiled>(
        Compiled{hostKernel(source, kernels::kFusedKernelName, int(call.in.size() + call.out.size())), source});
  }
  const auto compiled = std::static_pointer_cast<Compiled>(call.cache);
  const long long n = call.out[0].numel();
  if (n <= 0) return;
  const kernels::Launch l = kernels::gridStride("fused", n);
  kernels::checkLaunch(l, stepName(call));
  std::vector<void*> pointers;
  for (const TensorView& in : call.in) pointers.push_back(in.data);
  for (const TensorView& out : call.out) pointers.push_back(out.data);
  deviceOf(call).enqueue(stepName(call), [compiled, pointers = std::move(pointers), n, l] {
    recordExecutedSource(compiled->source);
    const GridOrder order = gridStrideOrder(l);
    compiled->launch(pointers.data(), n, l.blocks, l.threads, order.blocks.data(), order.threads.data());
  });
}

}  // namespace spmd::runtime::sim
