// Shared oneDNN plumbing for the CPU kernels: the engine, plain-layout memory descriptors, and
// the per-step cache that keeps a prepared primitive and its memory objects between calls.
#pragma once

#include <optional>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/Kernel.h"

namespace spmd::runtime::cpu {

dnnl::engine& engine();

// A row-major f32 descriptor for a tensor of rank 1, 2 or 4 (x, ab, abcd).
dnnl::memory::desc plainDesc(std::span<const int64_t> shape);

// The step's cached state, built by make() on first use.
template <typename State, typename Make>
State& cachedState(KernelCall& call, Make&& make) {
  if (!call.cache) call.cache = std::make_shared<State>(make());
  return *static_cast<State*>(call.cache.get());
}

// A primitive with its memory objects, keyed by DNNL_ARG_*; run() rebinds the data pointers.
struct Prepared {
  dnnl::primitive primitive;
  dnnl::stream stream;
  std::unordered_map<int, dnnl::memory> args;

  void bind(int arg, const dnnl::memory::desc& desc) { args[arg] = dnnl::memory(desc, engine(), nullptr); }
  void bind(int arg, const TensorView& view) { bind(arg, plainDesc(view.shape)); }
  void run(std::initializer_list<std::pair<int, void*>> pointers);
};

}  // namespace spmd::runtime::cpu
