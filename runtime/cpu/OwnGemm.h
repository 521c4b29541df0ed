// The CPU's own f32 GEMM: matmul's `own` variant (runtime/cpu/CpuVariants.cpp). oneDNN 2.6's AVX2
// matmul reaches 50-60 GFLOP/s where the sum runs long (K of 2048-4096, a weight gradient's or a
// language-model head's shapes) against 110-120 for OpenBLAS on the same two Zen 3 cores; this
// one packs panels of A and B (transposes read through strides) and runs a register tile of
// fused multiply-adds on them, as BLIS and OpenBLAS do.
//
// Each result element is one accumulator summed over k in order from zero (each K block adds to
// the stored partial sum), then plus the bias: its bits do not depend on the thread count, the
// blocking or the ISA copy (AVX-512, AVX2 + FMA, portable with std::fma), so the variant is
// thread-invariant and every SPMD_MAX_CPU_ISA gives the same result.
#pragma once

#include <cstdint>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu {

// C[s] = op(A[s]) op(B[s]) (+ bias) for s < batch, f32. Element (i, p) of op(A[s]) lies at
// a + s * aBatch + i * aRow + p * aCol, (p, j) of op(B[s]) at b + s * bBatch + p * bRow + j * bCol;
// C[s] is [m, n] row-major at c + s * m * n.
struct GemmOperands {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const float* a = nullptr;
  int64_t aBatch = 0, aRow = 0, aCol = 0;
  const float* b = nullptr;
  int64_t bBatch = 0, bRow = 0, bCol = 0;
  const float* bias = nullptr;  // [n], or none
  float* c = nullptr;
};

// On the OpenMP pool, with the copy ownIsa() names.
void ownGemm(const GemmOperands& g);

namespace own_gemm {
// f32 on a CPU with vectors: the portable copy (a std::fma call per term) runs where
// SPMD_MAX_CPU_ISA=portable caps a vector CPU, so that the cap changes no choice and no bit, but
// not on a CPU without AVX2, where it would be slower than oneDNN.
bool runs(const KernelCall& call);
// Where it paid untimed (SPMD_KERNEL_TIMING=0): CPUs with AVX2 and without AVX-512, whatever the cap.
bool pays(const KernelCall& call);
// inputs: lhs, rhs, bias (optional); output: result ([M, N] or [B, M, N], row-major).
void matmul(KernelCall& call);
}  // namespace own_gemm

}  // namespace spmd::runtime::cpu
