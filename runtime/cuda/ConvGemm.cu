// The convolution variant "gemm" on CUDA: runtime/kernels/ConvGemm.h's unfolding kernels
// launched through CudaApi, its product through cuBLAS (rowMajorGemm), its scratch the device's
// workspace. cuda/Conv.cpp offers it beside cuDNN's deterministic algorithms and times it with them.
#include <algorithm>
#include <cmath>

#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/Kernels.h"
#include "runtime/kernels/ConvGemm.h"

namespace spmd::runtime::cuda {

bool convGemmRuns(const KernelCall& call, size_t* scratchBytes) {
  const DType dtype = call.out[0].dtype;
  if (dtype != DType::f32 && dtype != DType::f64) return false;
  for (const TensorView& t : call.in)
    if (!t.layout.empty()) return false;
  kernels::ConvGeometry g;
  if (!kernels::convGeometryOf(call, &g)) return false;
  const size_t bytes = size_t(kernels::convGemmScratchElements(g)) * dtypeSize(dtype);
  if (bytes > kConvGemmScratchBytes) return false;
  *scratchBytes = bytes;
  return true;
}

void convGemm(KernelCall& call) {
  kernels::ConvGeometry g;
  size_t bytes = 0;
  if (!convGemmRuns(call, &bytes) || !kernels::convGeometryOf(call, &g))
    throw Error("the GEMM convolution does not compute '" + call.step.op + "' (" + call.step.location +
                "): f32 or f64 and at most " + std::to_string(kConvGemmScratchBytes >> 20) + " MiB of scratch");
  void* scratch = deviceOf(call).workspace(bytes);
  visitFloat(call.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    kernels::convGemm<CudaApi>(call, g, static_cast<T*>(scratch), rowMajorGemm);
  });
}

double timeConvGemm(KernelCall& call) {
  convGemm(call);  // warm-up: cuBLAS's first call of a shape chooses its kernel
  std::unique_ptr<DeviceClock> clock = deviceOf(call).clock();
  clock->mark();
  for (int run = 0; run < 3; ++run) {
    convGemm(call);
    clock->mark();
  }
  deviceOf(call).synchronize();
  const std::vector<double> at = clock->seconds();
  double least = INFINITY;
  for (size_t i = 1; i < at.size(); ++i) least = std::min(least, at[i] - at[i - 1]);
  return least;
}

}  // namespace spmd::runtime::cuda
