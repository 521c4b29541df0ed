// Reference kernel of a fused step: element by element, every instruction in double and rounded
// to the body's compute type (as the unfused reference kernels round each op's result), broadcast
// loads through explicit coordinates; bf16 inputs widened, bf16 outputs and round_bf16 rounded by
// runtime/base/BFloat16.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/base/BFloat16.h"
#include "runtime/base/Elementwise.h"
#include "runtime/device/FusedCall.h"
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
  visitFloat(fusedComputeType(call), [&](auto tag) {
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
            const TensorView& x = call.in[in.input];
            r = x.dtype == DType::bf16 ? double(fromBf16(x.as<bf16>()[offset])) : double(x.as<T>()[offset]);
            break;
          }
          case FusedOpKind::constant: r = in.value; break;
          case FusedOpKind::round_bf16: r = roundToBf16(float(a)); break;
#define SPMD_FUSED_CASE(name, Functor, ...) \
  case FusedOpKind::name: r = ew::Functor::apply(a, b); break;
          SPMD_ELEMENTWISE_OPS(SPMD_FUSED_CASE)
#undef SPMD_FUSED_CASE
        }
        v[k] = static_cast<T>(r);
      }
      for (size_t o = 0; o < call.out.size(); ++o) {
        if (call.out[o].dtype == DType::bf16)
          call.out[o].as<bf16>()[e] = toBf16(float(v[body.results[o]]));
        else
          call.out[o].as<T>()[e] = static_cast<T>(v[body.results[o]]);
      }
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
