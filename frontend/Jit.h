// spmd::jit: trace a function of Tensors and Trees once per input signature, compile it, cache
// the compiled Program, and run it on every call. jit is pmap over one device (JAX's model):
// the same core, without an axis, every argument and result replicated; results stay on the
// device until read, and `devices` picks the backend ("cpu", "sim", "cuda:0").
#pragma once

#include <string>
#include <vector>

#include "frontend/Pmap.h"

namespace spmd {

struct JitOptions {
  std::string name = "main";
  std::string devices = {};  // one device: "cpu", "sim", "cuda:0"; empty: $SPMD_DEVICES, else "cpu:1"
  std::string dumpDir = {};  // per-pass IR dumps; empty: SPMD_DUMP_IR
  bool planMemory = true;  // intermediates share one arena by lifetime (CompileOptions)
  bool fuseElementwise = true;  // elementwise chains run as fused kernels
  bool assignLayouts = true;  // the backend's blocked activation layouts (PmapOptions)
  // Stop at the first op whose output holds NaN (Inf), naming it, its layer and line; also
  // SPMD_DEBUG_NANS=1 (SPMD_DEBUG_INFS=1). Slow: runs unfused and scans every output.
  bool debugNans = false, debugInfs = false;
  // Arguments whose device-resident values the call may reuse for its results (PmapOptions).
  std::vector<int> donateArguments = {};
};

namespace detail {

// The pmap core in jit mode.
class JitCore : public PmapCore {
 public:
  JitCore(const JitOptions& o, Loc defined)
      : PmapCore({.devices = o.devices, .name = o.name, .dumpDir = o.dumpDir, .planMemory = o.planMemory,
                  .fuseElementwise = o.fuseElementwise, .assignLayouts = o.assignLayouts, .debugNans = o.debugNans, .debugInfs = o.debugInfs,
                  .donateArguments = o.donateArguments},
                 /*jit=*/true, defined) {}
};

// A jitted function called while another function is traced joins that trace, its ops inlined
// (jax's jit inside jit): the arguments as they are (traced ones, or constants), the function's
// results as it returns them; its options (devices, donation) are the enclosing function's.
template <typename F, typename... Args>
Result_t<F, Args...> callInline(F& f, const Args&... args) {
  return *callTraced(f, flattenArguments(args...).first.leaves, args...);
}

}  // namespace detail

template <typename F>
class Jitted : public detail::CompiledFunction<detail::JitCore> {
 public:
  Jitted(F f, const JitOptions& options, Loc defined)
      : CompiledFunction(std::make_shared<detail::JitCore>(options, defined)), f_(std::move(f)) {}

  // Called while another function is traced, the function joins that trace (detail::callInline);
  // else it runs, compiled for these arguments' signature.
  template <typename... Args>
  auto operator()(const Args&... args) {
    if (detail::tracing()) return detail::callInline(f_, args...);
    return detail::callCompiled(*core_, f_, args...);
  }

 private:
  F f_;
};

template <typename F>
Jitted<F> jit(F f, JitOptions options = {}, Loc loc = Loc::current()) {
  return Jitted<F>(std::move(f), options, loc);
}

}  // namespace spmd
