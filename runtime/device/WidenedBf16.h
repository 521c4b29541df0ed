// A backend's f32 kernel for a step on bf16 tensors (an op of runtime/program/Bf16Kernels.h that
// the compiler kept in bf16, where the backend's library has no bf16 kernel, or where timing found
// an f32 variant faster than the library's bf16 one: runtime/device/Variants.h): each bf16 operand
// widened into an f32 copy (exact), the f32 kernel on the copies, each bf16 result rounded from
// its f32 result (to nearest even). The same values as the program compiled to widen the op
// itself: the same f32 kernel between the same roundings.
#pragma once

#include <vector>

#include "runtime/base/BFloat16.h"
#include "runtime/device/Kernel.h"

namespace spmd::runtime {

// The conversions of whole buffers it runs: exact widening, rounding to nearest even (a backend
// may pass its own vector loops over its threads; the same bits).
using WidenBf16Fn = void (*)(const bf16* from, float* to, int64_t count);
using NarrowBf16Fn = void (*)(const float* from, bf16* to, int64_t count);

inline void widenBf16Loop(const bf16* from, float* to, int64_t count) {
  for (int64_t k = 0; k < count; ++k) to[k] = fromBf16(from[k]);
}
inline void narrowBf16Loop(const float* from, bf16* to, int64_t count) {
  for (int64_t k = 0; k < count; ++k) to[k] = toBf16(from[k]);
}

inline void widenedBf16(KernelCall& call, KernelFn f32, WidenBf16Fn widen = &widenBf16Loop,
                        NarrowBf16Fn narrow = &narrowBf16Loop) {
  struct Copies {
    std::vector<std::vector<float>> in, out;  // one per bf16 view; empty for the others
    std::vector<TensorView> inViews, outViews;
    std::shared_ptr<void> cache;  // the f32 kernel's
  };
  auto prepare = [](std::span<const TensorView> views, std::vector<std::vector<float>>& copies,
                    std::vector<TensorView>& wide) {
    copies.resize(views.size());
    wide.assign(views.begin(), views.end());
    for (size_t i = 0; i < views.size(); ++i)
      if (views[i].dtype == DType::bf16) {
        copies[i].resize(size_t(views[i].numel()));
        wide[i].data = copies[i].data();
        wide[i].dtype = DType::f32;
      }
  };
  if (!call.cache) {
    auto copies = std::make_shared<Copies>();
    prepare(call.in, copies->in, copies->inViews);
    prepare(call.out, copies->out, copies->outViews);
    call.cache = copies;
  }
  auto& c = *static_cast<Copies*>(call.cache.get());
  for (size_t i = 0; i < call.in.size(); ++i) {
    if (call.in[i].dtype != DType::bf16) {
      c.inViews[i].data = call.in[i].data;
      continue;
    }
    widen(call.in[i].as<bf16>(), c.in[i].data(), int64_t(c.in[i].size()));
  }
  for (size_t i = 0; i < call.out.size(); ++i)
    if (call.out[i].dtype != DType::bf16) c.outViews[i].data = call.out[i].data;
  KernelCall wide{call.step, c.inViews, c.outViews, c.cache, call.comm, call.device, nullptr, nullptr, call.variant};
  f32(wide);
  for (size_t i = 0; i < call.out.size(); ++i) {
    if (call.out[i].dtype != DType::bf16) continue;
    narrow(c.out[i].data(), call.out[i].as<bf16>(), int64_t(c.out[i].size()));
  }
}

template <KernelFn F32>
void widenedBf16(KernelCall& call) {
  widenedBf16(call, F32);
}

}  // namespace spmd::runtime
