// Reference kernel of a fused step: element by element, every instruction in double and rounded
// to the tensor's type (as the unfused reference kernels round each op's result), broadcast
// loads through explicit coordinates.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/base/Elementwise.h"
#include "runtime/device/Segments.h"
#include "runtime/program/FusedBody.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {

namespace {

// One segment (every fused step but those compiler/BatchFused made).
void fusedOne(KernelCall& call) {
  FusedBody body = FusedBody::parse(attrsOf<FusedAttrs>(call.step).body);
  body.checkArity(call.in.size(), call.out.size());
  std::span<const int64_t> space = call.out[0].shape;
  std::vector<std::vector<int64_t>> strides(body.instrs.size());
  for (size_t k = 0; k < body.instrs.size(); ++k)
    if (body.instrs[k].kind == FusedOpKind::load)
      strides[k] = loadStrides(body.instrs[k], call.in[body.instrs[k].input].shape, space);
  visitFloat(call.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<double> v(body.instrs.size());
    std::vector<int64_t> coord(space.size());
    for (int64_t e = 0; e < call.out[0].numel(); ++e) {
      for (int64_t d = static_cast<int64_t>(space.size()) - 1, rest = e; d >= 0; --d) {
        coord[d] = rest % space[d];
        rest /= space[d];
      }
      for (size_t k = 0; k < body.instrs.size(); ++k) {
        const FusedInstr& in = body.instrs[k];
        double a = in.a >= 0 ? v[in.a] : 0, b = in.b >= 0 ? v[in.b] : 0, r = 0;
        switch (in.kind) {
          case FusedOpKind::load: {
            int64_t offset = 0;
            for (size_t d = 0; d < space.size(); ++d) offset += coord[d] * strides[k][d];
            r = call.in[in.input].as<T>()[offset];
            break;
          }
          case FusedOpKind::constant: r = in.value; break;
#define SPMD_FUSED_CASE(name, Functor, ...) \
  case FusedOpKind::name: r = ew::Functor::apply(a, b); break;
          SPMD_ELEMENTWISE_OPS(SPMD_FUSED_CASE)
#undef SPMD_FUSED_CASE
        }
        v[k] = static_cast<T>(r);
      }
      for (size_t o = 0; o < call.out.size(); ++o) call.out[o].as<T>()[e] = static_cast<T>(v[body.results[o]]);
    }
  });
}

}  // namespace

// A step of several segments runs each as its own call (runtime/device/Segments.h).
void fused(KernelCall& call) {
  if (segmentCount(call) > 1) return forEachSegment(call, [](KernelCall& one) { fusedOne(one); });
  fusedOne(call);
}

}  // namespace spmd::runtime::reference
