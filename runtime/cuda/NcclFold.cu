// foldRows for NCCL's exact all-reduce: FoldRowsFn (kernels/Collectives.h) as a grid-stride kernel.
#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/NcclFold.h"
#include "runtime/kernels/Collectives.h"

namespace spmd::runtime::cuda {

void foldRows(const void* rows, int n, int64_t count, DType dtype, Reduction op, void* out, cudaStream_t stream) {
  if (count <= 0) return;
  const kernels::Launch l = kernels::gridStride("foldRows", count);
  kernels::checkLaunch(l, "the NCCL exact all-reduce's fold");
  const unsigned blocks = unsigned(l.blocks);
  switch (dtype) {
    case DType::f32:
      forEachKernel<<<blocks, l.threads, 0, stream>>>(
          count, kernels::FoldRowsFn<float>{static_cast<const float*>(rows), n, count, op, static_cast<float*>(out)});
      break;
    case DType::f64:
      forEachKernel<<<blocks, l.threads, 0, stream>>>(
          count, kernels::FoldRowsFn<double>{static_cast<const double*>(rows), n, count, op, static_cast<double*>(out)});
      break;
    case DType::i32:
      forEachKernel<<<blocks, l.threads, 0, stream>>>(
          count, kernels::FoldRowsFn<int32_t>{static_cast<const int32_t*>(rows), n, count, op, static_cast<int32_t*>(out)});
      break;
    case DType::bf16:
      throw bf16NotWidened("a collective");
  }
  check(cudaGetLastError(), "launch of the NCCL exact all-reduce's fold");
}

}  // namespace spmd::runtime::cuda
