// spmd::jit: trace a function of Tensors and Trees once per input signature, compile it, cache
// the compiled Program, and run it on every call (single device; pmap comes later).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/Flatten.h"

namespace spmd {

struct JitOptions {
  std::string name = "main";
  std::string dumpDir;  // per-pass IR dumps; empty: SPMD_DUMP_IR
};

namespace detail {

// --- the non-template core: signature cache, tracing, compiling, running ---------------------
struct Traced {
  std::vector<Tensor> outputs;        // traced leaves
  std::shared_ptr<void> prototype;    // the function's result, for its structure
};
using TraceFn = std::function<Traced(const std::vector<Tensor>& arguments)>;

class JitCore {
 public:
  explicit JitCore(JitOptions options);
  ~JitCore();
  // Runs the compiled function for these leaves, tracing and compiling first if this signature
  // is new. Returns the output leaves and the result prototype.
  std::pair<std::vector<Tensor>, std::shared_ptr<void>> call(const std::vector<Tensor>& leaves,
                                                             const std::string& structure,
                                                             const TraceFn& trace);
  int compileCount() const { return compileCount_; }
  const std::string& lastCompileReason() const { return lastReason_; }
  const std::string& lastTracedIr() const { return lastTracedIr_; }
  const std::string& lastProgramText() const { return lastProgramText_; }

 private:
  struct Entry;
  JitOptions options_;
  std::map<std::string, std::unique_ptr<Entry>> cache_;
  std::string lastSignature_, lastReason_, lastTracedIr_, lastProgramText_;
  int compileCount_ = 0;
};

}  // namespace detail

template <typename F>
class Jitted {
 public:
  Jitted(F f, JitOptions options) : f_(std::move(f)), core_(std::make_shared<detail::JitCore>(std::move(options))) {}

  template <typename... Args>
  auto operator()(const Args&... args) {
    using Out = std::decay_t<std::invoke_result_t<F&, const detail::Traced_t<Args>&...>>;
    std::vector<Tensor> leaves;
    std::string structure;
    (detail::flatten(args, leaves, structure), ...);
    auto trace = [&](const std::vector<Tensor>& traced) {
      size_t pos = 0;
      std::tuple<detail::Traced_t<Args>...> tracedArgs{detail::unflatten(args, traced, pos)...};
      auto out = std::make_shared<Out>(std::apply(f_, tracedArgs));
      detail::Traced result{{}, out};
      std::string ignored;
      detail::flatten(*out, result.outputs, ignored);
      return result;
    };
    auto [outputs, prototype] = core_->call(leaves, structure, trace);
    size_t pos = 0;
    return detail::unflatten(*static_cast<const Out*>(prototype.get()), outputs, pos);
  }

  // How many times this function was traced and compiled, and why the last time.
  int compileCount() const { return core_->compileCount(); }
  const std::string& lastCompileReason() const { return core_->lastCompileReason(); }
  const std::string& lastTracedIr() const { return core_->lastTracedIr(); }
  const std::string& lastProgramText() const { return core_->lastProgramText(); }

 private:
  F f_;
  std::shared_ptr<detail::JitCore> core_;
};

template <typename F>
Jitted<F> jit(F f, JitOptions options = {}) {
  return Jitted<F>(std::move(f), std::move(options));
}

}  // namespace spmd
