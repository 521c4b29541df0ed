// CUDA matmul, 2-D or batched, through cuBLAS (row-major operands passed as column-major transposes; f32 in
// full precision unless SPMD_ALLOW_TF32=1, f64 with DGEMM), bias added by the GEMM's beta over a
// broadcast of the bias rows.
#include <cublas_v2.h>

#include <cstdlib>

#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime::cuda {
namespace {

template <typename T>
__global__ void rowBiasKernel(const T* __restrict__ bias, T* __restrict__ y, long long rows, long long cols) {
  long long n = rows * cols;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = bias[i % cols];
}

void checkBlas(cublasStatus_t status, const KernelCall& call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLAS GEMM for '" + call.step.op + "' (" + call.step.location + ") failed with status " +
                std::to_string(static_cast<int>(status)));
}

bool allowTf32() {
  const char* env = std::getenv("SPMD_ALLOW_TF32");
  return env && std::string(env) == "1";
}

}  // namespace

void matmul(KernelCall& call) {
  bool ta = call.step.flag("transpose_lhs"), tb = call.step.flag("transpose_rhs");
  const TensorView &a = call.in[0], &b = call.in[1], &y = call.out[0];
  size_t r = y.rank() - 2;  // batched: [B, M, N], one GEMM per batch entry (strided batched)
  int64_t batch = r ? y.dim(0) : 1, m = y.dim(r), n = y.dim(r + 1), k = ta ? a.dim(r) : a.dim(r + 1);
  auto handle = static_cast<cublasHandle_t>(deviceOf(call).cublas());
  bool bias = call.in.size() > 2;
  visitFloat(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (bias)
    {
      const kernels::Launch l = checked(kernels::gridStride("rowBiasKernel", batch * m * n), call);
      rowBiasKernel<<<unsigned(l.blocks), l.threads, 0, streamOf(call)>>>(call.in[2].as<T>(), y.as<T>(), batch * m, n);
    }
    T alpha = 1, beta = bias ? 1 : 0;
    cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = tb ? int(k) : int(n), lda = ta ? int(m) : int(k);
    long long strideA = m * k, strideB = k * n, strideC = m * n;
    if constexpr (sizeof(T) == 8) {
      checkBlas(cublasDgemmStridedBatched(handle, opB, opA, int(n), int(m), int(k), &alpha, b.as<T>(), ldb, strideB,
                                          a.as<T>(), lda, strideA, &beta, y.as<T>(), int(n), strideC, int(batch)),
                call);
    } else {
      checkBlas(cublasGemmStridedBatchedEx(handle, opB, opA, int(n), int(m), int(k), &alpha, b.data, CUDA_R_32F, ldb,
                                           strideB, a.data, CUDA_R_32F, lda, strideA, &beta, y.data, CUDA_R_32F,
                                           int(n), strideC, int(batch),
                                           allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT),
                call);
    }
  });
  checkLaunch(call);
}

}  // namespace spmd::runtime::cuda
