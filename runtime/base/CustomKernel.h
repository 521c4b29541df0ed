// What a user's op kernel (spmd::registerCustomOp, frontend/CustomOp.h) sees: its inputs and
// outputs as plain row-major views of one replica's buffers in host memory, and the call's
// attributes. Light on purpose: the installed frontend headers include it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

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

}  // namespace spmd
