// checkProgram: a Program's fields against each other (see ProgramCheck.h).
#include "runtime/program/ProgramCheck.h"

#include <set>
#include <string>

#include "runtime/base/ElementwiseTable.h"
#include "runtime/base/Error.h"
#include "runtime/program/Catalog.h"
#include "runtime/program/MemoryPlan.h"

namespace spmd::runtime {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

int elementwiseArity(const std::string& op) {
  static const std::map<std::string, int> arity = {
#define SPMD_ARITY(name, Functor, n, formula) {#name, n},
      SPMD_ELEMENTWISE_OPS(SPMD_ARITY)
#undef SPMD_ARITY
  };
  auto it = arity.find(op);
  return it == arity.end() ? 0 : it->second;
}

}  // namespace

void checkProgram(const Program& p) {
  const std::string prefix = "program @" + p.name + ": ";
  auto buffer = [&](int id) {
    const BufferDesc& b = p.buffers[id];
    return "buffer %" + std::to_string(id) + " (" + std::string(dtypeName(b.dtype)) + shapeString(b.shape) + ")";
  };
  for (size_t id = 0; id < p.buffers.size(); ++id) {
    int64_t elements = 1;
    for (int64_t d : p.buffers[id].shape) {
      if (d < 0) throw Error(prefix + buffer(int(id)) + " has a negative dimension");
      if (d > 0 && elements > kMaxElements / d)
        throw Error(prefix + buffer(int(id)) + " has more than 2^40 elements; no buffer is that large");
      elements *= d;
    }
    if (!p.buffers[id].constant.empty() && p.buffers[id].constant.size() != p.buffers[id].bytes())
      throw Error(prefix + buffer(int(id)) + " is a constant of " + std::to_string(p.buffers[id].constant.size()) +
                  " bytes, not its shape's " + std::to_string(p.buffers[id].bytes()));
  }
  const int n = int(p.buffers.size());
  auto valid = [&](int id, const std::string& what) {
    if (id < 0 || id >= n) throw Error(prefix + what + " names buffer " + std::to_string(id) + " of " + std::to_string(n));
  };
  std::vector<bool> defined(n), written(n), isInput(n);
  for (int id : p.inputs) {
    valid(id, "inputs");
    if (isInput[id]) throw Error(prefix + buffer(id) + " is listed as an input twice");
    isInput[id] = defined[id] = true;
  }
  for (int id = 0; id < n; ++id)
    if (!p.buffers[id].constant.empty()) defined[id] = true;
  if (p.replicas < 1 || (p.axisName.empty() && p.replicas != 1))
    throw Error(prefix + "replicas " + std::to_string(p.replicas) + " is not valid" +
                (p.axisName.empty() ? " for a program without an axis (must be 1)" : " (must be >= 1)"));
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const Step& step = p.steps[s];
    const std::string at = "step " + std::to_string(s) + " '" + step.op + "' (" + step.where() + ")";
    if (!isProgramOp(step.op))
      throw Error(prefix + at + ": no such op in this spmd's catalog (runtime/program/Catalog.h); was the program "
                  "written by a newer spmd?");
    if (step.op == "all_reduce") {
      auto it = step.attrs.find("reduction");
      if (it == step.attrs.end() || !std::holds_alternative<std::string>(it->second))
        throw Error(prefix + at + " has no reduction attribute (a string: sum, mean, max or min)");
      try {
        parseReduction(std::get<std::string>(it->second));
      } catch (const Error& e) {
        throw Error(prefix + at + ": " + e.what());
      }
    }
    for (int id : step.inputs) {
      valid(id, at + " input");
      if (!defined[id]) throw Error(prefix + at + " reads " + buffer(id) + " before any step writes it");
    }
    for (int id : step.outputs) {
      valid(id, at + " output");
      if (isInput[id] || !p.buffers[id].constant.empty())
        throw Error(prefix + at + " writes " + buffer(id) + ", which is an input or a constant");
      if (written[id]) throw Error(prefix + at + " writes " + buffer(id) + ", which an earlier step wrote");
      written[id] = defined[id] = true;
    }
    auto same = [&](int a, int b) {
      return p.buffers[a].dtype == p.buffers[b].dtype && p.buffers[a].shape == p.buffers[b].shape;
    };
    if (int arity = elementwiseArity(step.op)) {
      if (int(step.inputs.size()) != arity || step.outputs.size() != 1)
        throw Error(prefix + at + " needs " + std::to_string(arity) + " operands and one result");
      for (int id : step.inputs)
        if (!same(id, step.outputs[0]))
          throw Error(prefix + at + ": operand " + buffer(id) + " does not match its result " + buffer(step.outputs[0]));
    }
    const bool collective = step.op == "all_reduce" || step.op == "all_gather" || step.op == "reduce_scatter" ||
                            step.op == "axis_index";
    if (collective && p.axisName.empty())
      throw Error(prefix + at + " is a collective, but the program has no axis");
    auto bytesOf = [&](int id) { return p.buffers[id].bytes(); };
    if (step.op == "all_reduce") {
      if (step.inputs.size() != step.outputs.size() || step.inputs.empty())
        throw Error(prefix + at + " needs as many results as operands");
      for (size_t i = 0; i < step.inputs.size(); ++i)
        if (!same(step.inputs[i], step.outputs[i]))
          throw Error(prefix + at + ": result " + buffer(step.outputs[i]) + " does not match its operand " +
                      buffer(step.inputs[i]));
    }
    if (step.op == "all_gather" || step.op == "reduce_scatter") {
      if (step.inputs.size() != 1 || step.outputs.size() != 1)
        throw Error(prefix + at + " needs one operand and one result");
      bool gather = step.op == "all_gather";
      int small = gather ? step.inputs[0] : step.outputs[0], large = gather ? step.outputs[0] : step.inputs[0];
      if (p.buffers[small].dtype != p.buffers[large].dtype ||
          bytesOf(large) != bytesOf(small) * size_t(p.replicas) ||
          (!gather && (p.buffers[large].shape.empty() || p.buffers[large].shape[0] != p.replicas)))
        throw Error(prefix + at + ": " + buffer(large) + " is not " + std::to_string(p.replicas) +
                    " (the program's replicas) times " + buffer(small));
    }
  }
  for (int id : p.outputs) {
    valid(id, "outputs");
    if (!defined[id]) throw Error(prefix + "output " + buffer(id) + " is never written");
  }
  checkMemoryPlan(p);
}

}  // namespace spmd::runtime
