// JitCore: signature keys, retrace reasons, tracing into a module, compiling and running.
#include "frontend/Jit.h"

#include "frontend/Trace.h"
#include "runtime/Executor.h"
#include "runtime/cpu/CpuDevice.h"

namespace spmd::detail {

struct JitCore::Entry {
  std::unique_ptr<runtime::Executor> executor;
  std::shared_ptr<void> prototype;
};

JitCore::JitCore(JitOptions options) : options_(std::move(options)) {}
JitCore::~JitCore() = default;

std::pair<std::vector<Tensor>, std::shared_ptr<void>> JitCore::call(
    const std::vector<Tensor>& leaves, const std::string& structure, const TraceFn& traceFn) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].defined())
      throw Error("jit '" + options_.name + "': input leaf " + std::to_string(i) +
                  " is an undefined tensor");
    if (leaves[i].isTraced())
      throw Error("jit '" + options_.name + "': input leaf " + std::to_string(i) +
                  " is a traced tensor; calling a jitted function inside another traced "
                  "function is not supported yet, call the plain function instead");
  }
  std::lock_guard lock(mutex_);
  std::string signature = signatureOf(leaves, structure);
  auto found = cache_.find(signature);
  if (found == cache_.end()) {
    beginCompile(signature, "'" + options_.name + "'");
    auto entry = std::make_unique<Entry>();
    Trace trace(options_.name);
    std::vector<Tensor> arguments;
    for (const Tensor& leaf : leaves) arguments.push_back(trace.addArgument(leaf.dtype(), leaf.shape()));
    Traced traced = traceFn(arguments);
    trace.finish(traced.outputs, Loc::current());
    // The NaN/Inf debug mode runs op by op (no fusion), so it can name the op at fault.
    const bool debugging = options_.debugNans || options_.debugInfs ||
                           runtime::debugNansFromEnvironment() || runtime::debugInfsFromEnvironment();
    runtime::Program program = compileTrace(
        trace, {.dumpDir = options_.dumpDir,
                .planMemory = options_.planMemory,
                .fuseElementwise = options_.fuseElementwise && !debugging}, options_.name);
    runtime::Executor::checkFitsHost(program, 1, "cpu:1 (jit '" + options_.name + "')");
    entry->executor = std::make_unique<runtime::Executor>(
        std::move(program), std::make_shared<runtime::CpuDevice>());
    entry->executor->enableDebugNonFinite(options_.debugNans, options_.debugInfs);
    entry->prototype = traced.prototype;
    found = cache_.emplace(signature, std::move(entry)).first;
  }
  called(signature);

  std::vector<Array> inputs;
  inputs.reserve(leaves.size());
  for (const Tensor& leaf : leaves) inputs.push_back(leaf.array());
  std::vector<Array> results = found->second->executor->run(inputs);
  std::vector<Tensor> outputs(results.begin(), results.end());
  return {std::move(outputs), found->second->prototype};
}

}  // namespace spmd::detail
