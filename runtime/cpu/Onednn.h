// Shared oneDNN plumbing for the CPU kernels: the engine, plain-layout memory descriptors, and
// the per-step cache that keeps a prepared primitive and its memory objects between calls.
#pragma once

#include <optional>

#include <oneapi/dnnl/dnnl.hpp>

#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu {

dnnl::engine& engine();

// oneDNN's data type for f32 or bf16 (throws for the others).
dnnl::memory::data_type dnnlType(DType dtype);
// A row-major descriptor for a tensor of rank 1, 2 or 4 (x, ab, abcd).
dnnl::memory::desc plainDesc(std::span<const int64_t> shape, DType dtype = DType::f32);
// The descriptor of a buffer as it lies in memory, in its dtype: plainDesc, or its blocked
// layout's format tag (runtime/program/Layouts.h).
dnnl::memory::desc layoutDesc(const TensorView& view);
// Channels per block of the activation layout oneDNN's convolutions choose on this machine's ISA
// (8 with AVX2, 16 with AVX-512), 0 when they choose plain; asked once.
int64_t preferredChannelBlock();

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

// dst = src x weights as a prepared oneDNN matmul on these descriptors (dst += when
// `accumulate`: a sum post-op), its three arguments bound for run().
Prepared preparedMatmul(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                        const dnnl::memory::desc& dst, bool accumulate = false);

// A layout conversion between the step's buffer (plain, or the blocked layout the compiler gave
// it) and the layout the primitive prefers; identity when they agree.
struct Relayout {
  dnnl::memory plain, internal;  // `plain`: the step's buffer, in its own layout
  std::optional<dnnl::reorder> reorder;

  Relayout(const dnnl::memory::desc& plainDesc, const dnnl::memory::desc& preferred, bool toPlain) {
    plain = dnnl::memory(plainDesc, engine(), nullptr);
    if (plainDesc == preferred) {
      internal = plain;
      return;
    }
    internal = dnnl::memory(preferred, engine());
    reorder = toPlain ? dnnl::reorder(internal, plain) : dnnl::reorder(plain, internal);
  }
  void run(dnnl::stream& s, void* data, bool toPlain) {
    plain.set_data_handle(data);
    if (!reorder) return;
    if (toPlain) reorder->execute(s, internal, plain);
    else reorder->execute(s, plain, internal);
  }
};

// A memory descriptor with the given dims that lets the primitive choose the layout.
dnnl::memory::desc anyDesc(std::span<const int64_t> shape, DType dtype = DType::f32);

// conv2d's stride, padding and dilation attributes as oneDNN dims (its dilation counts the gaps
// between taps: ours less 1), and the filter's dims as oneDNN reads them: OIHW, or with G > 1
// groups [G, O / G, I, KH, KW], the same bytes as the plain [O, I, KH, KW] filter.
struct ConvGeometry {
  dnnl::memory::dims strides, padding, dilates;
  int64_t groups = 1;
  explicit ConvGeometry(const Step& step);
  dnnl::memory::dims weights(std::span<const int64_t> filter) const;
  // The filter's plain memory descriptor (OIHW, or goihw with groups) and one that lets the
  // primitive choose its layout.
  dnnl::memory::desc plainWeights(std::span<const int64_t> filter, DType dtype) const;
  dnnl::memory::desc anyWeights(std::span<const int64_t> filter, DType dtype) const;
};

}  // namespace spmd::runtime::cpu
