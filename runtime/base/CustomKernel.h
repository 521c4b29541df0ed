// What a user's op kernel (spmd::registerCustomOp, frontend/CustomOp.h) sees: its inputs and
// outputs as plain row-major views of one replica's buffers in host memory, and the call's
// attributes. Light on purpose: the installed frontend headers include it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/base/Shape.h"

namespace spmd {

// A call's attributes, by name (spmd::customCall's `attributes`).
using CustomAttributes = std::map<std::string, std::string>;

struct CustomTensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::span<const int64_t> shape;

  int64_t numel() const { return numElements(shape); }
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

struct CustomKernelArgs {
  std::span<const CustomTensorView> inputs;
  std::span<const CustomTensorView> outputs;  // to be written, every element
  const CustomAttributes& attributes;
};

// A host kernel: fills the outputs from the inputs and attributes (nothing else: a step may run
// again, in any replica, on any thread). Throws spmd::Error to stop the call with a message.
using CustomCpuKernel = std::function<void(const CustomKernelArgs&)>;

// A kernel as CUDA C source, compiled by NVRTC on cuda devices and by the host compiler on sim
// (every thread of the launch emulated, run twice in two orders: a result that depends on the
// order, or an output element left unwritten, stops the step naming the op). The source defines
//   extern "C" __global__ void <entry>(spmd_custom_args a, long long n)
// where, for input i and output k (at most kCustomMaxTensors each, plain row-major):
//   a.in[i], a.out[k]                     their data
//   a.in_rank[i], a.in_shape[i][d]        their shapes (a.out_rank, a.out_shape likewise;
//                                         at most kCustomMaxRank dimensions)
//   a.attr[spmd_attr_<name>]              the call's attribute <name> as a double, for each
//                                         name in `attributes` (the call must give each one,
//                                         as a number)
// and n is output 0's element count; it is launched one thread per element in a grid-stride
// geometry (256 threads a block, at most 524280 blocks), so it walks
//   for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
//        i += (long long)blockDim.x * gridDim.x)
// A thread may write only elements no other thread reads or writes.
struct CustomCudaKernel {
  std::string source;
  std::string entry;
  std::vector<std::string> attributes = {};  // the numeric attributes it reads, as a.attr[spmd_attr_<name>]
  bool defined() const { return !source.empty(); }
};
inline constexpr int kCustomMaxTensors = 16;
inline constexpr int kCustomMaxRank = 8;

}  // namespace spmd
