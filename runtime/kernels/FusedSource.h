// CUDA C source for a fused step (runtime/program/FusedBody.h), compiled at load time with NVRTC
// by the CUDA backend and cached by its text, and compiled for the host by the simulator, which
// runs it with the kernel's launch geometry (runtime/sim/HostKernels.h). Plain C++: the
// generator builds and is tested on machines without a GPU (tests compile its output to PTX
// with NVRTC).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/device/Kernel.h"
#include "runtime/program/FusedBody.h"

namespace spmd::runtime::kernels {

inline constexpr const char* kFusedKernelName = "spmd_fused";

// One grid-stride kernel `spmd_fused(const T* in0, ..., T* out0, ..., long long n)`: each thread
// evaluates the body for its elements in registers; broadcast loads become index arithmetic
// with the shapes baked in as constants. `inputs` are the input shapes, `space` the outputs'.
std::string fusedKernelSource(const FusedBody& body, DType dtype,
                              const std::vector<std::vector<int64_t>>& inputs,
                              std::span<const int64_t> space, size_t outputs);

// The source for a `fused` step's call: its body, its outputs' dtype and its operands' shapes.
std::string fusedKernelSource(const KernelCall& call);

}  // namespace spmd::runtime::kernels
