// CUDA kernel of a fused step: the body's CUDA C (FusedSource) compiled by NVRTC for this GPU
// on the first call (cached in memory and on disk), loaded with cudaLibraryLoadData, launched on
// the device's stream every call; a step of several segments is one launch over all of them.
#include <memory>
#include <vector>

#include "runtime/cuda/Cuda.h"
#include "runtime/device/Segments.h"
#include "runtime/kernels/FusedSource.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/Nvrtc.h"

namespace spmd::runtime::cuda {
void fused(KernelCall& call) {
  if (!call.cache) {
    std::string binary = compileCuda(kernels::fusedKernelSource(call), deviceOf(call).arch());
    auto loaded = std::make_shared<LoadedKernel>();
    check(cudaLibraryLoadData(&loaded->library, binary.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "loading the fused kernel of " + call.step.location);
    check(cudaLibraryGetKernel(&loaded->kernel, loaded->library, kernels::kFusedKernelName), "fused kernel lookup");
    call.cache = loaded;
  }
  auto& loaded = *static_cast<LoadedKernel*>(call.cache.get());
  long long n = call.out[0].numel();
  std::vector<void*> pointers, args;
  std::vector<std::byte> segments;  // a step of several segments: their struct, by value (FusedSource.h)
  if (segmentCount(call) > 1) {
    segments = kernels::segmentsArgument(call, &n);
    args.push_back(segments.data());
  } else {
    for (const TensorView& in : call.in) pointers.push_back(in.data);
    for (const TensorView& out : call.out) pointers.push_back(out.data);
    for (void*& p : pointers) args.push_back(&p);
  }
  args.push_back(&n);
  if (n <= 0) return;
  const kernels::Launch l = checked(kernels::gridStride("fused", n), call);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(loaded.kernel), dim3(unsigned(l.blocks)), dim3(l.threads),
                         args.data(), 0, streamOf(call)),
        "launch of the fused kernel of " + call.step.location);
  deviceOf(call).markKernel("fused (NVRTC)");
}

}  // namespace spmd::runtime::cuda
