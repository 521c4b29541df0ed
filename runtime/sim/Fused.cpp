// The simulator's fused kernel: the CUDA backend's generated kernel (the text NVRTC compiles,
// runtime/kernels/FusedSource.h) built for the host (runtime/sim/HostKernels.h) on the step's
// first call and run on the stream thread with the CUDA backend's launch geometry, its
// (block, thread) pairs in a seeded random order.
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/device/Segments.h"
#include "runtime/kernels/FusedSource.h"
#include "runtime/sim/Coverage.h"
#include "runtime/sim/HostKernels.h"
#include "runtime/sim/SimApi.h"

namespace spmd::runtime::sim {

namespace {

struct Compiled {
  HostLaunch launch;
  std::string source;
  std::once_flag recorded;  // the coverage record takes the source once, not on every launch
};

}  // namespace

void fused(KernelCall& call) {
  const bool segmented = segmentCount(call) > 1;  // one kernel over every segment (FusedSource.h)
  if (!call.cache) {
    std::string source = kernels::fusedKernelSource(call);
    auto compiled = std::make_shared<Compiled>();
    compiled->launch = segmented ? hostKernel(source, kernels::kFusedKernelName, 1, kernels::kSegmentsStruct)
                                 : hostKernel(source, kernels::kFusedKernelName, int(call.in.size() + call.out.size()));
    compiled->source = std::move(source);
    call.cache = compiled;
  }
  const auto compiled = std::static_pointer_cast<Compiled>(call.cache);
  long long n = call.out[0].numel();
  // The segments' struct, copied into the queued work (as a launch copies its parameters).
  auto argument = std::make_shared<std::vector<std::byte>>();
  if (segmented) *argument = kernels::segmentsArgument(call, &n);
  if (n <= 0) return;
  const kernels::Launch l = kernels::gridStride("fused", n);
  kernels::checkLaunch(l, stepName(call));
  std::vector<void*> pointers;
  if (segmented) pointers.push_back(argument->data());
  else {
    for (const TensorView& in : call.in) pointers.push_back(in.data);
    for (const TensorView& out : call.out) pointers.push_back(out.data);
  }
  deviceOf(call).enqueue(stepName(call), [compiled, argument, pointers = std::move(pointers), n, l] {
    std::call_once(compiled->recorded, [&] { recordExecutedSource(compiled->source); });
    const GridOrder order = gridStrideOrder(l);
    compiled->launch(pointers.data(), n, l.blocks, l.threads, order.blocks.data(), order.threads.data());
  });
  deviceOf(call).markKernel("fused (host build)");
}

}  // namespace spmd::runtime::sim
