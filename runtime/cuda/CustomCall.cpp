// A custom op's step on a GPU (frontend/CustomOp.h): its CUDA kernel compiled by NVRTC for this
// GPU on the step's first call (cached as the fused kernels are), launched on the device's stream
// with the step's pointers by value; an op without one is refused (its host kernel would need
// copies through the host behind the user's back).
#include <memory>
#include <vector>

#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/Nvrtc.h"
#include "runtime/device/CustomKernels.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cuda {
namespace {
struct Compiled {
  LoadedKernel loaded;
  std::vector<double> attributes;  // the values of those its CUDA kernel reads
};
}  // namespace

void custom_call(KernelCall& call) {
  if (!call.cache) {
    const std::shared_ptr<const CustomKernels> kernels = customKernelsOf(call.step);
    const std::string& target = attrsOf<CustomCallAttrs>(call.step).target;
    if (!kernels->cuda.defined())
      throw Error("custom_call (" + call.step.where() + "): custom op '" + target + "' has a host kernel only; give "
                  "its registration a CUDA kernel (CustomOp::cuda) or run the program on cpu or sim devices");
    auto compiled = std::make_shared<Compiled>();
    compiled->attributes = customCudaAttributeValues(call.step, kernels->cuda);
    std::string binary;
    try {
      binary = compileCuda(customCudaSource(kernels->cuda), deviceOf(call).arch());
    } catch (const Error& e) {
      throw Error("custom op '" + target + "' (" + call.step.where() + "): its CUDA kernel '" + kernels->cuda.entry +
                  "' does not build: " + e.what());
    }
    LoadedKernel* loaded = &compiled->loaded;
    check(cudaLibraryLoadData(&loaded->library, binary.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "loading custom op '" + target + "''s CUDA kernel");
    check(cudaLibraryGetKernel(&loaded->kernel, loaded->library, kernels->cuda.entry.c_str()),
          "custom op '" + target + "': its CUDA kernel '" + kernels->cuda.entry +
              "' (declare it extern \"C\" __global__)");
    call.cache = compiled;
  }
  const auto& compiled = *static_cast<const Compiled*>(call.cache.get());
  const LoadedKernel& loaded = compiled.loaded;
  CustomCudaArgs args = customCudaArgs(call, compiled.attributes);
  long long n = call.out[0].numel();
  if (n <= 0) return;
  void* params[] = {&args, &n};
  const kernels::Launch l = checked(kernels::gridStride("custom_call", n), call);
  check(cudaLaunchKernel(reinterpret_cast<const void*>(loaded.kernel), dim3(unsigned(l.blocks)), dim3(l.threads), params,
                         0, streamOf(call)),
        "launch of custom op kernel " + call.step.where());
  deviceOf(call).markKernel("custom_call (NVRTC)");
}

}  // namespace spmd::runtime::cuda
