// spmd::jit: trace a function of Tensors and Trees once per input signature, compile it, cache
// the compiled Program, and run it on every call (single device; pmap comes later).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/CompileLog.h"
#include "frontend/Flatten.h"

namespace spmd {

struct JitOptions {
  std::string name = "main";
  std::string dumpDir;  // per-pass IR dumps; empty: SPMD_DUMP_IR
  bool planMemory = true;  // intermediates share one arena by lifetime (CompileOptions)
  bool fuseElementwise = true;  // elementwise chains run as fused kernels
  // Stop at the first op whose output holds NaN (Inf), naming it, its layer and line; also
  // SPMD_DEBUG_NANS=1 (SPMD_DEBUG_INFS=1). Slow: runs unfused and scans every output.
  bool debugNans = false, debugInfs = false;
};

namespace detail {

// --- the non-template core: signature cache, tracing, compiling, running ---------------------
struct Traced {
  std::vector<Tensor> outputs;        // traced leaves
  std::shared_ptr<void> prototype;    // the function's result, for its structure
};
using TraceFn = std::function<Traced(const std::vector<Tensor>& arguments)>;

class JitCore : public CompileLog {
 public:
  explicit JitCore(JitOptions options);
  ~JitCore();
  // Runs the compiled function for these leaves, tracing and compiling first if this signature
  // is new. Returns the output leaves and the result prototype.
  std::pair<std::vector<Tensor>, std::shared_ptr<void>> call(const std::vector<Tensor>& leaves,
                                                             const std::string& structure,
                                                             const TraceFn& trace);

 private:
  struct Entry;
  JitOptions options_;
  std::map<std::string, std::unique_ptr<Entry>> cache_;
  // Calls from several threads queue: tracing, the cache and the executor's arena are used by
  // one call at a time (a compiled function is safe to share, as in JAX).
  std::mutex mutex_;
};

}  // namespace detail

template <typename F>
class Jitted : public detail::CompiledFunction<detail::JitCore> {
 public:
  Jitted(F f, JitOptions options)
      : CompiledFunction(std::make_shared<detail::JitCore>(std::move(options))), f_(std::move(f)) {}

  template <typename... Args>
  auto operator()(const Args&... args) {
    using Out = detail::Result_t<F, Args...>;
    std::vector<Tensor> leaves;
    std::string structure;
    (detail::flatten(args, leaves, structure), ...);
    auto trace = [&](const std::vector<Tensor>& traced) {
      auto out = detail::callTraced(f_, traced, args...);
      detail::Traced result{{}, out};
      std::string ignored;
      detail::flatten(*out, result.outputs, ignored);
      return result;
    };
    auto [outputs, prototype] = core_->call(leaves, structure, trace);
    return detail::rebuild<Out>(prototype, outputs);
  }

 private:
  F f_;
};

template <typename F>
Jitted<F> jit(F f, JitOptions options = {}) {
  return Jitted<F>(std::move(f), std::move(options));
}

}  // namespace spmd
