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
// `channelsLast`: the outputs and full-size inputs are an NCHW space laid out "nhwc"
// (runtime/program/Layouts.h), so a broadcast load takes its coordinates from the index in
// N, H, W, C order; broadcast inputs (per-channel vectors, a pooled [N, C]) are plain.
// `dtype` is the body's compute type (FusedBody.h's fusedComputeType); `inputTypes` and
// `outputTypes`, where given, each operand's: a bf16 one is a `const void*` / `void*` parameter,
// read widened and written rounded (runtime/base/BFloat16.h, embedded).
std::string fusedKernelSource(const FusedBody& body, DType dtype,
                              const std::vector<std::vector<int64_t>>& inputs,
                              std::span<const int64_t> space, size_t outputs, bool channelsLast = false,
                              const std::vector<DType>& inputTypes = {}, const std::vector<DType>& outputTypes = {});

// The source for a `fused` step's call: its body, its outputs' dtype and its operands' shapes;
// the segmented kernel below for a step of several segments. The same for a step of a Program.
std::string fusedKernelSource(const KernelCall& call);
std::string fusedKernelSource(const Step& step, const Program& program);

// A `fused` step of several segments (the optimizer's per-parameter updates batched by
// compiler/BatchFused: one body, every load direct): one grid-stride kernel
// `spmd_fused(spmd_segments s, long long n)` over the segments' elements end to end, the struct
// passed by value (kSegmentsStruct: `long long start[segments + 1]; T* p[segments * (inputs +
// outputs)]`, each segment's inputs then outputs); each element finds its segment by binary search.
inline constexpr const char* kSegmentsStruct = "spmd_segments";
std::string fusedSegmentsSource(const FusedBody& body, DType dtype, int64_t segments, size_t inputs, size_t outputs);
// The bytes of the spmd_segments struct of a call: the segments' starts, then their pointers.
std::vector<std::byte> segmentsArgument(const KernelCall& call, long long* total);

}  // namespace spmd::runtime::kernels
