// A custom op's step on the simulator (frontend/CustomOp.h): its CUDA kernel, when it has one,
// built for the host (runtime/sim/HostKernels.h) and run on the stream thread twice, each time
// in its own order of blocks and threads over outputs filled with a different pattern: outputs
// that differ between the runs are a race (their result depends on the order the threads ran)
// or were left unwritten, and stop the step naming the op. Without one, its host kernel on the
// stream thread.
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/CustomKernels.h"
#include "runtime/program/OpAttrs.h"
#include "runtime/sim/HostKernels.h"
#include "runtime/sim/SimApi.h"

namespace spmd::runtime::sim {
namespace {

struct CompiledCustomKernel {
  HostLaunch launch = nullptr;
  std::string target;
  std::vector<double> attributes;  // the values of those its CUDA kernel reads
};

struct Output {
  std::byte* data;
  size_t bytes, element;
};

// The first element of `outputs` that differs between `first` and the outputs as they are now:
// an error naming the op, the output, the element and whether it was left unwritten (it holds
// each run's fill pattern) or raced.
void compareRuns(const std::vector<Output>& outputs, const std::vector<std::vector<std::byte>>& first,
                 const std::string& target) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Output& o = outputs[k];
    for (size_t e = 0; e * o.element < o.bytes; ++e) {
      const std::byte* a = first[k].data() + e * o.element;
      const std::byte* b = o.data + e * o.element;
      if (std::memcmp(a, b, o.element) == 0) continue;
      bool unwritten = true;
      for (size_t i = 0; i < o.element; ++i) unwritten = unwritten && a[i] == std::byte{0xA5} && b[i] == std::byte{0x5A};
      throw Error("custom op '" + target + "': its CUDA kernel " +
                  (unwritten ? "left element " + std::to_string(e) + " of output " + std::to_string(k) +
                                   " unwritten; write every element of every output"
                             : "gave element " + std::to_string(e) + " of output " + std::to_string(k) +
                                   " different values when its threads ran in another order: a race (two threads "
                                   "write one element, or one reads what another writes); give each element one "
                                   "thread, or reduce in a fixed order"));
    }
  }
}

}  // namespace

void customCall(KernelCall& call) {
  static const KernelFn cpu = cpuKernels().at("custom_call").fn;
  const std::shared_ptr<const CustomKernels> kernels = customKernelsOf(call.step);
  if (!kernels->cuda.defined())
    return queueCpu(call, cpu, {call.in.begin(), call.in.end()}, {call.out.begin(), call.out.end()}, &call.cache);
  if (!call.cache) {
    auto compiled = std::make_shared<CompiledCustomKernel>();
    compiled->target = attrsOf<CustomCallAttrs>(call.step).target;
    compiled->attributes = customCudaAttributeValues(call.step, kernels->cuda);
    try {
      compiled->launch = hostKernel(customCudaSource(kernels->cuda), kernels->cuda.entry, 1, "spmd_custom_args");
    } catch (const Error& e) {
      throw Error("custom op '" + compiled->target + "' (" + call.step.where() + "): its CUDA kernel '" +
                  kernels->cuda.entry + "' does not build: " + e.what());
    }
    call.cache = compiled;
  }
  const auto compiled = std::static_pointer_cast<CompiledCustomKernel>(call.cache);
  auto args = std::make_shared<CustomCudaArgs>(customCudaArgs(call, compiled->attributes));
  const long long n = call.out[0].numel();
  const kernels::Launch l = kernels::gridStride("custom_call", n);
  kernels::checkLaunch(l, stepName(call));
  std::vector<Output> outputs;
  for (const TensorView& out : call.out)
    outputs.push_back({static_cast<std::byte*>(out.data), size_t(out.numel()) * dtypeSize(out.dtype), dtypeSize(out.dtype)});
  deviceOf(call).enqueue(stepName(call), [compiled, args, outputs, n, l] {
    void* pointer = args.get();
    const GridOrder order = gridStrideOrder(l);
    for (const Output& o : outputs) std::memset(o.data, 0xA5, o.bytes);
    compiled->launch(&pointer, n, l.blocks, l.threads, order.blocks.data(), order.threads.data());
    std::vector<std::vector<std::byte>> first;
    for (const Output& o : outputs) first.emplace_back(o.data, o.data + o.bytes);
    // Again, blocks and threads in the reverse of that order, over the other pattern.
    const std::vector<long long> blocks(order.blocks.rbegin(), order.blocks.rend());
    const std::vector<int> threads(order.threads.rbegin(), order.threads.rend());
    for (const Output& o : outputs) std::memset(o.data, 0x5A, o.bytes);
    compiled->launch(&pointer, n, l.blocks, l.threads, blocks.data(), threads.data());
    compareRuns(outputs, first, compiled->target);
  });
  deviceOf(call).markKernel("custom_call (host build of its CUDA kernel)");
}

}  // namespace spmd::runtime::sim
