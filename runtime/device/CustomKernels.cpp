// The registry of users' op kernels and the custom_call kernel every host backend runs
// (runtime/device/CustomKernels.h).
#include "runtime/device/CustomKernels.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/base/Error.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime {
namespace {

struct CustomKernelRegistry {
  std::mutex mutex;
  std::map<std::string, std::shared_ptr<const CustomKernels>> kernels;
};

CustomKernelRegistry& customKernelRegistry() {
  static CustomKernelRegistry r;
  return r;
}

std::shared_ptr<const CustomKernels> kernelOf(const std::string& target) {
  CustomKernelRegistry& r = customKernelRegistry();
  std::lock_guard lock(r.mutex);
  auto it = r.kernels.find(target);
  return it == r.kernels.end() ? nullptr : it->second;
}

std::string registeredList() {
  std::string list;
  for (const std::string& name : customKernelNames()) list += (list.empty() ? "" : ", ") + name;
  return list.empty() ? "none" : list;
}

// What a step keeps: its kernel and its attributes, parsed once.
struct CustomCallState {
  std::shared_ptr<const CustomKernels> kernels;
  CustomAttributes attributes;
};

bool keyChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string encodeCustomAttributes(const CustomAttributes& attributes) {
  std::string text;
  for (const auto& [key, value] : attributes) {
    if (key.empty() || !std::all_of(key.begin(), key.end(), keyChar))
      throw Error("custom op attribute '" + key + "': a name is letters, digits and '_'");
    text += (text.empty() ? "" : ";") + key + "=";
    for (unsigned char c : value) {
      if (c == '%' || c == ';' || c == '=' || c < 0x20 || c == 0x7f) {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", c);
        text += hex;
      } else {
        text += char(c);
      }
    }
  }
  return text;
}

CustomAttributes decodeCustomAttributes(const std::string& config) {
  CustomAttributes attributes;
  size_t at = 0;
  while (at < config.size()) {
    const size_t end = std::min(config.find(';', at), config.size()), equals = config.find('=', at);
    if (equals == std::string::npos || equals >= end)
      throw Error("custom op config '" + config + "': '" + config.substr(at, end - at) + "' is not name=value");
    const std::string key = config.substr(at, equals - at);
    std::string value;
    for (size_t i = equals + 1; i < end; ++i) {
      if (config[i] != '%') {
        value += config[i];
        continue;
      }
      if (i + 2 >= end || !std::isxdigit(static_cast<unsigned char>(config[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(config[i + 2])))
        throw Error("custom op config '" + config + "': attribute '" + key + "' has a '%' not followed by two hex digits");
      value += char(std::stoi(config.substr(i + 1, 2), nullptr, 16));
      i += 2;
    }
    if (!attributes.emplace(key, std::move(value)).second)
      throw Error("custom op config '" + config + "': attribute '" + key + "' is given twice");
    at = end + 1;
  }
  return attributes;
}

void registerCustomKernel(const std::string& target, CustomCpuKernel cpu, CustomCudaKernel cuda) {
  if (!cpu) throw Error("custom op '" + target + "': its CPU kernel is empty");
  if (cuda.defined() && cuda.entry.empty())
    throw Error("custom op '" + target + "': its CUDA kernel has source but no entry (the __global__ function's name)");
  if (cuda.attributes.size() > size_t(kCustomMaxAttributes))
    throw Error("custom op '" + target + "': its CUDA kernel reads " + std::to_string(cuda.attributes.size()) +
                " attributes; it can read at most " + std::to_string(kCustomMaxAttributes));
  for (size_t i = 0; i < cuda.attributes.size(); ++i) {
    const std::string& name = cuda.attributes[i];
    if (name.empty() || !std::all_of(name.begin(), name.end(), keyChar))
      throw Error("custom op '" + target + "': its CUDA kernel's attribute '" + name + "' is not a name (letters, digits and '_')");
    if (std::find(cuda.attributes.begin(), cuda.attributes.begin() + long(i), name) != cuda.attributes.begin() + long(i))
      throw Error("custom op '" + target + "': its CUDA kernel names attribute '" + name + "' twice");
  }
  CustomKernelRegistry& r = customKernelRegistry();
  std::lock_guard lock(r.mutex);
  auto kernels = std::make_shared<const CustomKernels>(CustomKernels{std::move(cpu), std::move(cuda)});
  if (!r.kernels.emplace(target, std::move(kernels)).second)
    throw Error("custom op '" + target + "' is registered already; register each op once per process");
}

bool customKernelRegistered(const std::string& target) { return kernelOf(target) != nullptr; }

std::vector<std::string> customKernelNames() {
  CustomKernelRegistry& r = customKernelRegistry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& [name, _] : r.kernels) names.push_back(name);
  return names;
}

void checkCustomCall(const Step& step) {
  const std::string& target = attrsOf<CustomCallAttrs>(step).target;
  if (!customKernelRegistered(target))
    throw Error("step 'custom_call' (" + step.where() + ") runs custom op '" + target +
                "', which is not registered in this process (registered: " + registeredList() +
                "); call spmd::registerCustomOp for it before the program is loaded (link the library that "
                "defines it and run its registration)");
}

std::shared_ptr<const CustomKernels> customKernelsOf(const Step& step) {
  checkCustomCall(step);
  return kernelOf(attrsOf<CustomCallAttrs>(step).target);
}

std::string customCudaSource(const CustomCudaKernel& kernel) {
  const std::string tensors = std::to_string(kCustomMaxTensors), rank = std::to_string(kCustomMaxRank);
  std::string text = "// spmd: a custom op's CUDA kernel (frontend/CustomOp.h)\nstruct spmd_custom_args {\n"
                     "  const void* in[" + tensors + "];\n  void* out[" + tensors + "];\n"
                     "  long long in_shape[" + tensors + "][" + rank + "];\n  long long out_shape[" + tensors + "][" + rank + "];\n"
                     "  int in_rank[" + tensors + "];\n  int out_rank[" + tensors + "];\n"
                     "  double attr[" + std::to_string(kCustomMaxAttributes) + "];\n};\n";
  for (size_t i = 0; i < kernel.attributes.size(); ++i)
    text += "enum { spmd_attr_" + kernel.attributes[i] + " = " + std::to_string(i) + " };\n";
  return text + kernel.source + "\n";
}

std::vector<double> customCudaAttributeValues(const std::string& target, const CustomCudaKernel& kernel,
                                              const CustomAttributes& attributes) {
  std::vector<double> values;
  for (const std::string& name : kernel.attributes) {
    auto it = attributes.find(name);
    if (it == attributes.end())
      throw Error("custom op '" + target + "': its CUDA kernel reads attribute '" + name +
                  "', which the call does not give; pass it as a number (customCall(..., {{\"" + name + "\", \"1.5\"}}))");
    double value = 0;
    const char* end = it->second.data() + it->second.size();
    auto [at, error] = std::from_chars(it->second.data(), end, value);
    if (it->second.empty() || error != std::errc() || at != end)
      throw Error("custom op '" + target + "': its CUDA kernel reads attribute '" + name + "' as a number, but the call gives '" +
                  it->second + "'; give a decimal number such as 0.25 or -3 (a text attribute only the host kernel can read)");
    values.push_back(value);
  }
  return values;
}

std::vector<double> customCudaAttributeValues(const Step& step, const CustomCudaKernel& kernel) {
  const CustomCallAttrs& attrs = attrsOf<CustomCallAttrs>(step);
  try {
    return customCudaAttributeValues(attrs.target, kernel, decodeCustomAttributes(attrs.config));
  } catch (const Error& e) {
    throw Error("step 'custom_call' (" + step.where() + "): " + e.what());
  }
}

static_assert(sizeof(CustomCudaArgs) == 2560, "spmd_custom_args in customCudaSource must match CustomCudaArgs");

CustomCudaArgs customCudaArgs(const KernelCall& call, std::span<const double> attributes) {
  if (call.in.size() > size_t(kCustomMaxTensors) || call.out.size() > size_t(kCustomMaxTensors))
    throw Error("step 'custom_call' (" + call.step.where() + "): a CUDA kernel takes at most " +
                std::to_string(kCustomMaxTensors) + " inputs and outputs");
  CustomCudaArgs args{};
  auto shape = [&](const TensorView& view, long long* to, int& rank, const char* what, size_t i) {
    if (view.shape.size() > size_t(kCustomMaxRank))
      throw Error("step 'custom_call' (" + call.step.where() + "): " + what + " " + std::to_string(i) + " has " +
                  std::to_string(view.shape.size()) + " dimensions; a CUDA kernel takes at most " +
                  std::to_string(kCustomMaxRank) + " (reshape it before the call)");
    rank = int(view.shape.size());
    for (size_t d = 0; d < view.shape.size(); ++d) to[d] = view.shape[d];
  };
  for (size_t i = 0; i < call.in.size(); ++i) {
    args.in[i] = call.in[i].data;
    shape(call.in[i], args.in_shape[i], args.in_rank[i], "input", i);
  }
  for (size_t k = 0; k < call.out.size(); ++k) {
    args.out[k] = call.out[k].data;
    shape(call.out[k], args.out_shape[k], args.out_rank[k], "output", k);
  }
  for (size_t a = 0; a < attributes.size() && a < size_t(kCustomMaxAttributes); ++a) args.attr[a] = attributes[a];
  return args;
}

void runCustomCall(KernelCall& call) {
  if (!call.cache) {
    const CustomCallAttrs& attrs = attrsOf<CustomCallAttrs>(call.step);
    auto state = std::make_shared<CustomCallState>();
    state->kernels = customKernelsOf(call.step);
    try {
      state->attributes = decodeCustomAttributes(attrs.config);
    } catch (const Error& e) {
      throw Error("step 'custom_call' (" + call.step.where() + ") of custom op '" + attrs.target + "': " + e.what());
    }
    call.cache = std::move(state);
  }
  const auto& state = *static_cast<const CustomCallState*>(call.cache.get());
  auto views = [&](std::span<const TensorView> from, const char* what) {
    std::vector<CustomTensorView> to;
    for (size_t i = 0; i < from.size(); ++i) {
      if (!from[i].layout.empty())
        throw Error("step 'custom_call' (" + call.step.where() + "): " + what + " " + std::to_string(i) + " is in layout " +
                    std::string(from[i].layout) + "; custom ops take plain tensors (this is a bug in spmd's layout pass)");
      to.push_back({from[i].data, from[i].dtype, from[i].shape});
    }
    return to;
  };
  const std::vector<CustomTensorView> in = views(call.in, "input"), out = views(call.out, "output");
  try {
    state.kernels->cpu(CustomKernelArgs{in, out, state.attributes});
  } catch (const std::exception&) {
    throw;  // the step's error names the op and line, then this message
  } catch (...) {  // an int, a string literal: on a replica's thread it would end the process
    throw Error("custom op '" + attrsOf<CustomCallAttrs>(call.step).target +
                "': its host kernel threw something that is not a std::exception; throw spmd::Error (or another "
                "std::exception) with a message");
  }
}

}  // namespace spmd::runtime
