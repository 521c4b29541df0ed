// The CPU backend's own kernels: the ops it serves better than the kernel library's host loop
// (runtime/kernels/Library.h), X(name, source) per op with what serves it; every other op runs
// the library's kernel (runtime/cpu/KernelTable.cpp).
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd {
struct bf16;  // runtime/base/BFloat16.h
}

#define SPMD_CPU_OPS(X)                                                                             \
  X(conv2d, "variants: Winograd, stride-2 GEMMs, oneDNN, sliced (cpu/CpuVariants.cpp)")           \
  X(conv2d_backward_data, "variants: Winograd, stride-2 GEMMs, oneDNN, sliced (cpu/CpuVariants.cpp)") \
  X(conv2d_backward_filter, "variants: Winograd, GEMMs, one-channel, oneDNN, sliced (cpu/CpuVariants.cpp)") \
  X(batch_norm_train, "own statistics and normalization, oneDNN's on plain inputs (cpu/Norm.cpp)")   \
  X(batch_norm_infer, "own normalization, oneDNN's on plain inputs (cpu/Norm.cpp)")                 \
  X(batch_norm_train_backward, "double sums per channel (cpu/Norm.cpp)")                            \
  X(matmul, "variants: oneDNN, sliced, reference for f64 (cpu/CpuVariants.cpp)")                  \
  X(softmax, "threaded rows, own vector exp in f32 (cpu/Softmax.cpp)")                            \
  X(log_softmax, "threaded rows, own vector exp in f32 (cpu/Softmax.cpp)")                        \
  X(softmax_cross_entropy, "threaded rows, own vector exp in f32 (cpu/Softmax.cpp)")              \
  X(softmax_cross_entropy_backward, "threaded rows, own vector exp in f32 (cpu/Softmax.cpp)")     \
  X(argmax, "row loops (cpu/Dense.cpp)")                                                            \
  X(argsort, "threaded rows, a stable merge sort each (cpu/Dense.cpp)")                             \
  X(embedding, "threaded row copies (cpu/Embedding.cpp)")                                           \
  X(embedding_backward, "counting sort, then threaded row sums (cpu/Embedding.cpp)")                \
  X(broadcast_in_dim, "strided gathers (cpu/Shape.cpp)")                                            \
  X(reshape, "memcpy, none in place (cpu/Shape.cpp)")                                               \
  X(slice, "memcpy of contiguous runs (cpu/Shape.cpp)")                                             \
  X(concatenate, "memcpy of contiguous runs (cpu/Shape.cpp)")                                       \
  X(pad, "a memset, then memcpy of contiguous runs (cpu/Shape.cpp)")                                \
  X(transpose, "strided gathers (cpu/Shape.cpp)")                                                   \
  X(reduce_sum, "threaded double sums (cpu/Reduce.cpp)")                                            \
  X(reduce_mean, "threaded double sums (cpu/Reduce.cpp)")                                           \
  X(reduce_max, "threaded (cpu/Reduce.cpp)")                                                        \
  X(all_reduce, "the replica's Communicator (cpu/Collectives.cpp)")                                 \
  X(all_gather, "the replica's Communicator (cpu/Collectives.cpp)")                                 \
  X(reduce_scatter, "the replica's Communicator (cpu/Collectives.cpp)")                             \
  X(ppermute, "the replica's Communicator's all-gather (cpu/Collectives.cpp)")                      \
  X(axis_index, "the replica's Communicator (cpu/Collectives.cpp)")                                 \
  X(relayout, "oneDNN reorder (cpu/Relayout.cpp)")                                                  \
  X(convert, "vectorized f32/bf16 loops, the library's for other types (cpu/Convert.cpp)")          \
  X(fused, "chunked loops over the fused body (cpu/Fused.cpp)")                                    \
  X(custom_call, "the user's registered host kernel (device/CustomKernels.cpp)")

namespace spmd::runtime::cpu {

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_CPU_OPS(SPMD_DECLARE_KERNEL)
SPMD_ELEMENTWISE_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

// Handles a convolution or matmul call over nothing (runtime/cpu/EmptySums.cpp): true where its
// outputs hold no element, or where its sums run over an empty extent (then written: zeros, plus
// the bias); false where there is work for its variants.
bool emptySums(KernelCall& call);
// Whether a convolution or matmul call is one emptySums handles (nothing for a variant to run,
// nor for the timing to choose).
bool overNothing(const KernelCall& call);

// The f32 kernel `f32` on a step's bf16 operands widened and its bf16 results rounded
// (runtime/device/WidenedBf16.h) with convert's vector loops over the OpenMP pool
// (runtime/cpu/Convert.cpp): the bits of runtime/base/BFloat16.h's conversions.
void widenedOnCpu(KernelCall& call, KernelFn f32);

// Convert's loops on one thread (the fused kernel's chunks): n bf16 values widened, n f32 values
// rounded to bf16, or rounded to the nearest bf16 value and kept in f32.
void widenBf16Values(const bf16* x, float* y, int64_t n);
void narrowToBf16Values(const float* x, bf16* y, int64_t n);
void roundToBf16Values(const float* x, float* y, int64_t n);

}  // namespace spmd::runtime::cpu
