// CPU kernel of a fused step: the body runs over chunks of the iteration space, one loop per
// instruction over the chunk (vectorizable, in the tensor's type), chunks across OpenMP threads.
#include <cmath>
#include <memory>
#include <vector>

#include "runtime/base/Elementwise.h"
#include "runtime/program/FusedBody.h"
#include "runtime/cpu/Kernels.h"

namespace spmd::runtime::cpu {
namespace {

constexpr int64_t kChunk = 512;

struct Prepared {
  FusedBody body;
  std::vector<std::vector<int64_t>> strides;  // per instruction (loads only)
  std::vector<bool> direct;                    // load reads the input at the element's index
  std::vector<int> output;                     // the output instruction k computes into, or -1
};

template <typename T>
void evaluate(const Prepared& p, const KernelCall& call) {
  std::span<const int64_t> space = call.out[0].shape;
  const int64_t n = call.out[0].numel();
  const size_t count = p.body.instrs.size();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel if (chunks > 8)
  {
    std::vector<T> regs(count * kChunk);
    std::vector<const T*> value(count);  // where instruction k's chunk lies
    for (size_t k = 0; k < count; ++k)     // literals: filled once per thread
      if (p.body.instrs[k].kind == FusedOpKind::constant && p.output[k] < 0) {
        std::fill_n(regs.data() + k * kChunk, kChunk, static_cast<T>(p.body.instrs[k].value));
        value[k] = regs.data() + k * kChunk;
      }
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t base = c * kChunk, len = std::min(kChunk, n - base);
      for (size_t k = 0; k < count; ++k) {
        const FusedInstr& in = p.body.instrs[k];
        if (in.kind == FusedOpKind::load && p.direct[k]) {  // read in place, no copy
          value[k] = call.in[in.input].as<T>() + base;
          continue;
        }
        if (in.kind == FusedOpKind::constant && p.output[k] < 0) continue;
        // Results are computed straight into their output (outputs never alias inputs).
        T* __restrict r = p.output[k] >= 0 ? call.out[p.output[k]].as<T>() + base : regs.data() + k * kChunk;
        value[k] = r;
        const T* __restrict a = in.a >= 0 ? value[in.a] : nullptr;
        const T* __restrict b = in.b >= 0 ? value[in.b] : nullptr;
        switch (in.kind) {
          case FusedOpKind::load: {
            const T* src = call.in[in.input].as<T>();
            const std::vector<int64_t>& st = p.strides[k];
            for (int64_t j = 0; j < len; ++j) {
              int64_t e = base + j, offset = 0;
              for (size_t d = space.size(); d-- > 0;) {
                offset += (e % space[d]) * st[d];
                e /= space[d];
              }
              r[j] = src[offset];
            }
            break;
          }
          case FusedOpKind::constant:
            for (int64_t j = 0; j < len; ++j) r[j] = static_cast<T>(in.value);
            break;
#define SPMD_FUSED_LOOP(name, Functor, arity, ...)                                        \
  case FusedOpKind::name:                                                                 \
    if constexpr (arity == 2)                                                             \
      for (int64_t j = 0; j < len; ++j) r[j] = ew::Functor::apply(a[j], b[j]);            \
    else                                                                                  \
      for (int64_t j = 0; j < len; ++j) r[j] = ew::Functor::apply(a[j], a[j]);            \
    break;
          SPMD_ELEMENTWISE_OPS(SPMD_FUSED_LOOP)
#undef SPMD_FUSED_LOOP
        }
      }
      for (size_t o = 0; o < call.out.size(); ++o) {  // results not computed in place
        const T* r = value[p.body.results[o]];
        T* y = call.out[o].as<T>() + base;
        if (r != y) std::copy(r, r + len, y);
      }
    }
  }
}

}  // namespace

void fused(KernelCall& call) {
  if (!call.cache) {
    auto p = std::make_shared<Prepared>();
    p->body = FusedBody::parse(call.step.text("body"));
    p->body.checkArity(call.in.size(), call.out.size());
    p->strides.resize(p->body.instrs.size());
    p->direct.resize(p->body.instrs.size());
    p->output.assign(p->body.instrs.size(), -1);
    for (size_t o = 0; o < p->body.results.size(); ++o)
      if (p->output[p->body.results[o]] < 0) p->output[p->body.results[o]] = static_cast<int>(o);
    for (size_t k = 0; k < p->body.instrs.size(); ++k) {
      const FusedInstr& in = p->body.instrs[k];
      if (in.kind != FusedOpKind::load) continue;
      p->strides[k] = loadStrides(in, call.in[in.input].shape, call.out[0].shape);
      p->direct[k] = !in.broadcast;
    }
    call.cache = p;
  }
  const auto& p = *static_cast<const Prepared*>(call.cache.get());
  visitFloat(call.out[0].dtype, [&](auto tag) { evaluate<decltype(tag)>(p, call); });
}

}  // namespace spmd::runtime::cpu
