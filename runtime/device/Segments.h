// Steps of several segments: a `fused` step that compiler/BatchFused made from k adjacent fused
// steps with one body (the optimizer's per-parameter updates) has the `segments` attribute k, and
// segment s's operands are inputs [s * ni, (s + 1) * ni) and outputs [s * no, (s + 1) * no). The
// GPU and the simulator run it as one kernel (runtime/kernels/FusedSource.h); backends that gain
// nothing from that run each segment as its own call of their one-segment kernel.
#pragma once

#include <memory>
#include <vector>

#include "runtime/device/Kernel.h"

namespace spmd::runtime {

// The call's segment count; throws when it does not divide its operands.
inline int64_t segmentCount(const KernelCall& call) {
  const int64_t k = segmentsOf(call.step);
  if (k == 1) return 1;
  if (k < 1 || call.in.size() % size_t(k) != 0 || call.out.size() % size_t(k) != 0)
    throw Error("step '" + call.step.op + "' (" + call.step.where() + ") has " + std::to_string(k) + " segments but " +
                std::to_string(call.in.size()) + " inputs and " + std::to_string(call.out.size()) +
                " outputs; each segment needs the same number of each");
  return k;
}

// Calls `kernel` once per segment with the segment's operands and a cache slot of its own.
template <typename Kernel>
void forEachSegment(KernelCall& call, Kernel kernel) {
  const int64_t k = segmentCount(call);
  const size_t ni = call.in.size() / size_t(k), no = call.out.size() / size_t(k);
  using Caches = std::vector<std::shared_ptr<void>>;
  if (!call.cache) call.cache = std::make_shared<Caches>(size_t(k));
  Caches& caches = *static_cast<Caches*>(call.cache.get());
  for (size_t s = 0; s < size_t(k); ++s) {
    KernelCall one{call.step, call.in.subspan(s * ni, ni), call.out.subspan(s * no, no), caches[s], call.comm,
                   call.device, call.later, call.check};
    kernel(one);
  }
}

}  // namespace spmd::runtime
