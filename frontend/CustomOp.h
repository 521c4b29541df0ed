// The user's own ops from outside spmd's tree (jax.ffi, torch.library's custom ops): a name, a
// shape rule, a host kernel on plain views, and optionally a VJP written in the DSL. A call is one
// spmd.custom_call op in the IR (its name and attributes in dumps, round-tripping through
// spmd-opt), one step of the Program on every replica, and, with a VJP, differentiable under
// grad, value_and_grad, pmap, checkpoint and accumulation (traced as a spmd::customVjp whose
// backward is the VJP).
//
//   spmd::registerCustomOp({
//       .name = "mylib.softsign",
//       .shape = [](const auto& in, const auto&) { return std::vector{in[0]}; },
//       .cpu = [](const spmd::CustomKernelArgs& a) {
//         const float* x = a.inputs[0].as<float>();
//         float* y = a.outputs[0].as<float>();
//         for (int64_t i = 0; i < a.outputs[0].numel(); ++i) y[i] = x[i] / (1 + std::abs(x[i]));
//       },
//       .vjp = [](const auto& in, const auto&, const auto& g, const auto&) {
//         Tensor d = 1.0 + abs(in[0]);
//         return std::vector{g[0] / (d * d)};
//       }});
//   Tensor y = spmd::customCall("mylib.softsign", {x})[0];
//
// The host kernel runs on cpu devices (and on sim when there is no CUDA kernel), in every replica;
// it must fill every output element from its inputs and attributes alone (no state: a step may
// run again, on any thread). A CUDA kernel runs on cuda and sim devices. A Program that calls a
// custom op runs only in a process that registered it (refused before its first step otherwise,
// naming the op).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "frontend/Tensor.h"
#include "runtime/base/CustomKernel.h"

namespace spmd {

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  bool operator==(const TensorType&) const = default;
};

struct CustomOp {
  // Letters, digits and "_.:-", e.g. "mylib.softsign": what dumps and errors call it.
  std::string name;
  // The outputs' types from the inputs' types and the call's attributes; throw spmd::Error (its
  // message is prefixed with the call's line) for inputs the op does not take.
  std::function<std::vector<TensorType>(const std::vector<TensorType>& inputs, const CustomAttributes& attributes)> shape;
  CustomCpuKernel cpu;
  // Optional: the kernel as CUDA C source for cuda devices (NVRTC) and sim (built for the host
  // and run in two orders of its threads, which catches races); runtime/base/CustomKernel.h says
  // how it is declared and launched. Without one, cuda devices refuse the op.
  CustomCudaKernel cuda = {};
  // Optional, in the DSL: the inputs' cotangents from the inputs, the outputs and the outputs'
  // cotangents (one per input, in order; a default Tensor for zeros, and for integer inputs).
  std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                                    const std::vector<Tensor>& cotangents, const CustomAttributes& attributes)>
      vjp = {};
};

// Registers `op` for this process (every thread, every later compile and Program load); errors
// name `loc` when the name is malformed or taken, or the shape rule or kernel is missing.
void registerCustomOp(CustomOp op, Loc loc = Loc::current());
// Whether `name` is registered.
bool customOpRegistered(const std::string& name);
// Calls the registered op `name` on `inputs` inside a traced function (jit, pmap, shardMap, ...),
// returning its outputs.
std::vector<Tensor> customCall(const std::string& name, const std::vector<Tensor>& inputs,
                               const CustomAttributes& attributes = {}, Loc loc = Loc::current());

}  // namespace spmd
