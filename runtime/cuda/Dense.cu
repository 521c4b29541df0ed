// CUDA matmul, 2-D or batched, through cuBLAS (row-major operands passed as column-major transposes; f32 in
// full precision unless SPMD_ALLOW_TF32=1, f64 with DGEMM, bf16 operands with f32 accumulation
// into an f32 scratch result rounded once to bf16), bias added by the GEMM's beta over a broadcast of the bias rows
// (runtime/kernels/Dense.h).
#include <cublas_v2.h>

#include <cstdlib>

#include "runtime/cuda/CudaApi.cuh"
#include "runtime/cuda/Kernels.h"
#include "runtime/kernels/Convert.h"
#include "runtime/kernels/ConvGemm.h"
#include "runtime/kernels/Dense.h"
#include "runtime/kernels/EmptySums.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime::cuda {
namespace {

void checkBlas(cublasStatus_t status, const KernelCall& call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLAS GEMM for '" + call.step.op + "' (" + call.step.location + ") failed with status " +
                std::to_string(static_cast<int>(status)));
}

bool allowTf32() {
  const char* env = std::getenv("SPMD_ALLOW_TF32");
  return env && std::string(env) == "1";
}

// y[i] = bias[i % cols], widened to f32: the start of a bf16 GEMM's f32 result.
struct WidenedRowBiasFn {
  const bf16* bias;
  float* y;
  int64_t cols;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = fromBf16(bias[i % cols]); }
};

}  // namespace

bool emptySums(KernelCall& call) {
  if (!kernels::emptySums<CudaApi>(call)) return false;
  checkLaunch(call);
  return true;
}

void matmul(KernelCall& call) {
  if (emptySums(call)) return;  // K = 0 is a leading dimension of 0 to cuBLAS
  bool ta = call.step.flag("transpose_lhs"), tb = call.step.flag("transpose_rhs");
  const TensorView &a = call.in[0], &b = call.in[1], &y = call.out[0];
  size_t r = y.rank() - 2;  // batched: [B, M, N], one GEMM per batch entry (strided batched)
  int64_t batch = r ? y.dim(0) : 1, m = y.dim(r), n = y.dim(r + 1), k = ta ? a.dim(r) : a.dim(r + 1);
  auto handle = static_cast<cublasHandle_t>(deviceOf(call).cublas());
  bool bias = call.in.size() > 2;
  cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  int ldb = tb ? int(k) : int(n), lda = ta ? int(m) : int(k);
  long long strideA = m * k, strideB = k * n, strideC = m * n;
  if (a.dtype == DType::bf16) {
    // bf16 operands, f32 accumulation, the result rounded once: cuBLAS computes into an f32
    // scratch result that the bias rows start, then one pass rounds it to bf16. With a bf16 C,
    // cuBLAS may split k and sum the partial products in bf16 (seen on an H200: 2 bf16 steps
    // off on a 64x40 product over k = 128, where the widened product rounds once).
    const int64_t count = batch * m * n;
    auto* wide = static_cast<float*>(deviceOf(call).workspace(size_t(count) * sizeof(float)));
    if (bias) CudaApi::forEach(call, count, WidenedRowBiasFn{call.in[2].as<bf16>(), wide, n});
    float alpha = 1, beta = bias ? 1 : 0;
    checkBlas(cublasGemmStridedBatchedEx(handle, opB, opA, int(n), int(m), int(k), &alpha, b.data, CUDA_R_16BF, ldb,
                                         strideB, a.data, CUDA_R_16BF, lda, strideA, &beta, wide, CUDA_R_32F, int(n),
                                         strideC, int(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              call);
    deviceOf(call).markKernel("cuBLAS GEMM (bf16)");
    CudaApi::forEach(call, count, kernels::ConvertFn<bf16, float>{wide, y.as<bf16>()});
    return checkLaunch(call);
  }
  visitFloat(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (bias) CudaApi::forEach(call, batch * m * n, kernels::RowBiasFn<T>{call.in[2].as<T>(), y.as<T>(), n});
    T alpha = 1, beta = bias ? 1 : 0;
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
  deviceOf(call).markKernel("cuBLAS GEMM");
}

void rowMajorGemm(KernelCall& call, const kernels::GemmArgs& g) {
  auto handle = static_cast<cublasHandle_t>(deviceOf(call).cublas());
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T.
  const cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.dtype == DType::f64) {
    const double one = 1, beta = g.accumulate ? 1 : 0;
    checkBlas(cublasDgemm(handle, opB, opA, int(g.n), int(g.m), int(g.k), &one, static_cast<const double*>(g.b),
                          int(g.ldb), static_cast<const double*>(g.a), int(g.lda), &beta, static_cast<double*>(g.c),
                          int(g.ldc)),
              call);
  } else if (g.dtype == DType::bf16 && g.output == DType::f32) {  // products of bf16 summed in f32
    const float one = 1, beta = g.accumulate ? 1 : 0;
    checkBlas(cublasGemmEx(handle, opB, opA, int(g.n), int(g.m), int(g.k), &one, g.b, CUDA_R_16BF, int(g.ldb), g.a,
                           CUDA_R_16BF, int(g.lda), &beta, g.c, CUDA_R_32F, int(g.ldc), CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              call);
  } else if (g.dtype == DType::f32) {
    const float one = 1, beta = g.accumulate ? 1 : 0;
    checkBlas(cublasGemmEx(handle, opB, opA, int(g.n), int(g.m), int(g.k), &one, g.b, CUDA_R_32F, int(g.ldb), g.a,
                           CUDA_R_32F, int(g.lda), &beta, g.c, CUDA_R_32F, int(g.ldc),
                           allowTf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              call);
  } else {
    throw Error("the GEMM of '" + call.step.op + "' (" + call.step.location + ") takes f32 or f64 (or bf16 summed in "
                "f32), not " + std::string(dtypeName(g.dtype)));
  }
  deviceOf(call).markKernel("cuBLAS GEMM");
}

void writeChannelBias(KernelCall& call, const TensorView& bias, const TensorView& y) {
  const int64_t plane = y.layout == kChannelsLast ? 1 : y.dim(2) * y.dim(3);  // channels innermost: 1
  if (y.dtype == DType::bf16)
    CudaApi::forEach(call, y.numel(), kernels::ChannelBiasFn<bf16>{bias.as<bf16>(), y.as<bf16>(), y.dim(1), plane});
  else
    visitFloat(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      CudaApi::forEach(call, y.numel(), kernels::ChannelBiasFn<T>{bias.as<T>(), y.as<T>(), y.dim(1), plane});
    });
  checkLaunch(call);
}

void reluInPlace(KernelCall& call, const TensorView& y) {
  if (y.dtype == DType::bf16)
    CudaApi::forEach(call, y.numel(), kernels::ReluInPlaceFn<bf16>{y.as<bf16>()});
  else
    visitFloat(y.dtype, [&](auto tag) {
      using T = decltype(tag);
      CudaApi::forEach(call, y.numel(), kernels::ReluInPlaceFn<T>{y.as<T>()});
    });
  checkLaunch(call);
}

}  // namespace spmd::runtime::cuda
