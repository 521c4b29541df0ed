// The kernel library: every kernel written once (this folder), instantiated for a backend's
// execution Api (Common.h): nvcc compiles it for the GPU (runtime/cuda/CudaApi.cuh), the host
// compiler for the simulator's stream thread (runtime/sim/SimApi.h) and for the CPU's replica
// thread (runtime/cpu/HostLoop.h). A backend's kernel table is addLibrary<Api> followed by its
// own kernels for the ops it serves better (oneDNN on the CPU, cuDNN and cuBLAS on CUDA), so a new
// family of kernels is one header here and one line in SPMD_LIBRARY_FAMILIES, and no backend file
// changes. Block kernels (shared memory and barriers) go to the Apis that run blocks
// (addBlockLibrary). `spmd-run --kernels BACKEND` prints which code serves each op.
#pragma once

#include <string_view>

#include "runtime/kernels/Collectives.h"
#include "runtime/kernels/Convert.h"
#include "runtime/kernels/Elementwise.h"
#include "runtime/kernels/Embedding.h"
#include "runtime/kernels/Loss.h"
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Random.h"
#include "runtime/kernels/Reduce.h"
#include "runtime/kernels/Shape.h"
#include "runtime/kernels/Slice.h"
#include "runtime/kernels/Softmax.h"
#include "runtime/kernels/TakeAlongAxis.h"
#include "runtime/kernels/Window.h"

// Every family of the library by its op list (each header defines its list next to its kernels).
#define SPMD_LIBRARY_FAMILIES(F)                                                              \
  F(SPMD_LIBRARY_SHAPE_OPS) F(SPMD_LIBRARY_REDUCE_OPS) F(SPMD_LIBRARY_LOSS_OPS)               \
  F(SPMD_LIBRARY_WINDOW_OPS) F(SPMD_LIBRARY_SOFTMAX_OPS) F(SPMD_LIBRARY_RANDOM_OPS)             \
  F(SPMD_LIBRARY_EMBEDDING_OPS) F(SPMD_LIBRARY_CONVERT_OPS) F(SPMD_LIBRARY_SLICE_OPS)         \
  F(SPMD_LIBRARY_COLLECTIVE_OPS) F(SPMD_LIBRARY_TAKE_ALONG_AXIS_OPS)

namespace spmd::runtime::kernels {

// Enters every library kernel, compiled for `Api`, into `table` as served by `source`.
template <class Api>
void addLibrary(KernelTable& table, std::string_view source) {
#define SPMD_LIBRARY_ENTRY(name) table[#name] = Kernel{&kernels::name<Api>, source};
#define SPMD_LIBRARY_FAMILY(OPS) OPS(SPMD_LIBRARY_ENTRY)
  SPMD_LIBRARY_FAMILIES(SPMD_LIBRARY_FAMILY)
#undef SPMD_LIBRARY_FAMILY
#undef SPMD_LIBRARY_ENTRY
#define SPMD_LIBRARY_ELEMENTWISE(name, Functor, ...) \
  table[#name] = Kernel{&kernels::elementwise<Api, ew::Functor>, source};
  SPMD_ELEMENTWISE_OPS(SPMD_LIBRARY_ELEMENTWISE)
#undef SPMD_LIBRARY_ELEMENTWISE
}

// Enters the library's block kernels (SPMD_LIBRARY_BLOCK_OPS), for an Api with forBlocks.
template <class Api>
void addBlockLibrary(KernelTable& table, std::string_view source) {
#define SPMD_LIBRARY_ENTRY(name) table[#name] = Kernel{&kernels::name<Api>, source};
  SPMD_LIBRARY_BLOCK_OPS(SPMD_LIBRARY_ENTRY)
#undef SPMD_LIBRARY_ENTRY
}

}  // namespace spmd::runtime::kernels
