// The kernels of users' ops by name (registered by spmd::registerCustomOp, frontend/CustomOp.h):
// every backend's custom_call kernel looks its step's target up here. A Program whose steps name
// a target that is not registered in this process is refused before it runs.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/base/CustomKernel.h"
#include "runtime/device/Kernel.h"

namespace spmd::runtime {

// A call's attributes as the step's `config` text, "a=2.5;mode=fast" (keys: letters, digits and
// '_'; in values '%', ';' and '=' and control characters as %XX), and back; both throw naming
// what is malformed.
std::string encodeCustomAttributes(const CustomAttributes& attributes);
CustomAttributes decodeCustomAttributes(const std::string& config);

// What is registered for one target: its host kernel, and its CUDA kernel when it has one.
struct CustomKernels {
  CustomCpuKernel cpu;
  CustomCudaKernel cuda;
};

// Registers `kernels` for `target`; throws when `target` has them already.
void registerCustomKernel(const std::string& target, CustomCpuKernel cpu, CustomCudaKernel cuda = {});
bool customKernelRegistered(const std::string& target);
// The kernels registered for the step's target, or an error naming the step (checkCustomCall's).
std::shared_ptr<const CustomKernels> customKernelsOf(const Step& step);
// What a CUDA kernel's source is compiled with: the spmd_custom_args struct and the
// spmd_attr_<name> indices of its attributes, then the source.
std::string customCudaSource(const CustomCudaKernel& kernel);
// The by-value argument of a launch (runtime/base/CustomKernel.h says what each field holds);
// the same layout as the source's spmd_custom_args.
inline constexpr int kCustomMaxAttributes = 16;
struct CustomCudaArgs {
  const void* in[kCustomMaxTensors];
  void* out[kCustomMaxTensors];
  long long in_shape[kCustomMaxTensors][kCustomMaxRank];
  long long out_shape[kCustomMaxTensors][kCustomMaxRank];
  int in_rank[kCustomMaxTensors];
  int out_rank[kCustomMaxTensors];
  double attr[kCustomMaxAttributes];
};
// The values of the attributes `kernel` reads, in its order, from a call's `attributes`; throws
// naming `target` and the attribute when one is missing or not a number.
std::vector<double> customCudaAttributeValues(const std::string& target, const CustomCudaKernel& kernel,
                                              const CustomAttributes& attributes);
// The argument of a launch of the step's views with those attribute values; throws naming the
// step when it has too many tensors or dimensions.
CustomCudaArgs customCudaArgs(const KernelCall& call, std::span<const double> attributes);
// The attribute values of a custom_call step whose op has a CUDA kernel (parsed from its config),
// an error naming the step when they are not there.
std::vector<double> customCudaAttributeValues(const Step& step, const CustomCudaKernel& kernel);
std::vector<std::string> customKernelNames();  // sorted
// Throws, naming the step and what to do, when a custom_call step's target is not registered.
void checkCustomCall(const Step& step);
// A custom_call step on host memory: the target's kernel on the step's views (plain layouts
// only), its attributes parsed from the step's `config` once (kept in call.cache).
void runCustomCall(KernelCall& call);

}  // namespace spmd::runtime
