// The CPU kernels that run the shared kernel code the CUDA backend and the simulator launch
// (runtime/cuda/kernels/): pooling, softmax, log_softmax, the random ops, embedding, convert,
// slice, pad, concatenate and select, as a plain loop on the replica's thread, so every backend
// computes these ops with one definition. oneDNN's pooling
// primitive is not used: its max-pooling backward needs the forward's workspace, which the
// separate backward step does not have, and its NaN handling is not specified.
#include <cstring>

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/kernels/Convert.h"
#include "runtime/cuda/kernels/Embedding.h"
#include "runtime/cuda/kernels/Pool.h"
#include "runtime/cuda/kernels/Random.h"
#include "runtime/cuda/kernels/Slice.h"
#include "runtime/cuda/kernels/Softmax.h"

namespace spmd::runtime::cpu {
namespace {

struct HostLoop {
  template <typename F>
  static void forEach(const KernelCall&, int64_t n, const F& f) {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
  static void zero(const KernelCall&, void* dst, size_t bytes) { std::memset(dst, 0, bytes); }
  static void toHost(const KernelCall&, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
  static std::shared_ptr<std::byte> allocate(const KernelCall&, size_t bytes) {
    return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
  }
};

}  // namespace

#define SPMD_SHARED(name) \
  void name(KernelCall& call) { gpu::name<HostLoop>(call); }
SPMD_GPU_POOL_OPS(SPMD_SHARED)
SPMD_GPU_SOFTMAX_OPS(SPMD_SHARED)
SPMD_GPU_RANDOM_OPS(SPMD_SHARED)
SPMD_GPU_EMBEDDING_OPS(SPMD_SHARED)
SPMD_GPU_CONVERT_OPS(SPMD_SHARED)
SPMD_GPU_SLICE_OPS(SPMD_SHARED)
#undef SPMD_SHARED

}  // namespace spmd::runtime::cpu
