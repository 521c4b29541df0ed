// The convolution variant "gemm" on CUDA: runtime/kernels/ConvGemm.h's unfolding kernels
// launched through CudaApi, its product through cuBLAS (rowMajorGemm), its scratch the device's
// workspace. cuda/Conv.cpp offers it beside cuDNN's deterministic algorithms and times it with them.
#include <algorithm>
#include <cmath>

#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/Kernels.h"
#include "runtime/kernels/ConvGemm.h"

namespace spmd::runtime::cuda {

namespace {

// The step's geometry and chunk, when the variant computes it.
bool planOf(const KernelCall& call, kernels::ConvGeometry* g, uint32_t* chunk) {
  const DType dtype = call.out[0].dtype;
  if (dtype != DType::f32 && dtype != DType::f64 && dtype != DType::bf16) return false;
  if (!kernels::convGeometryOf(call, g)) return false;  // plain NCHW operands only
  const size_t sum = kernels::convGemmSumBytes(dtype);
  *chunk = kernels::convGemmChunk(*g, sum, kConvGemmScratchBytes);
  return kernels::convGemmScratchBytes(*g, 1, sum) <= kConvGemmScratchBytes;
}

}  // namespace

bool convGemmRuns(const KernelCall& call, size_t* scratchBytes) {
  kernels::ConvGeometry g;
  uint32_t chunk = 0;
  if (!planOf(call, &g, &chunk)) return false;
  *scratchBytes = kernels::convGemmScratchBytes(g, chunk, kernels::convGemmSumBytes(call.out[0].dtype));
  return true;
}

void convGemm(KernelCall& call) {
  kernels::ConvGeometry g;
  uint32_t chunk = 0;
  if (!planOf(call, &g, &chunk))
    throw Error("the GEMM convolution does not compute '" + call.step.op + "' (" + call.step.location +
                "): it takes plain NCHW f32, f64 or bf16 tensors of fewer than 2^31 elements, one image's columns within " +
                std::to_string(kConvGemmScratchBytes >> 20) + " MiB");
  const size_t bytes = kernels::convGemmScratchBytes(g, chunk, kernels::convGemmSumBytes(call.out[0].dtype));
  kernels::convGemmOf<CudaApi>(call, g, chunk, static_cast<std::byte*>(deviceOf(call).workspace(bytes)), rowMajorGemm);
}

double timeConvGemm(KernelCall& call) {
  return leastOfThreeRuns(call, [&] { convGemm(call); });  // the warm-up: cuBLAS chooses its kernel for the shape
}

}  // namespace spmd::runtime::cuda
