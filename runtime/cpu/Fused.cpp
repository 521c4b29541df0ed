// CPU kernel of a fused step: the body runs over chunks of the iteration space (in the result's
// layout, plain or blocked), one loop per instruction over the chunk (vectorizable, in the
// body's compute type), chunks across OpenMP threads. An f32 gelu or gelu_backward runs the loop
// its CPU kernel runs (cpu/OwnGelu.h), so fusing one changes no bit. A bf16 input is widened
// chunk by chunk as it is loaded, a bf16 output rounded as it is copied out, and round_bf16 runs
// convert's rounding loop (cpu/Convert.cpp): the bits of the standalone converts it replaces.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "runtime/base/BFloat16.h"
#include "runtime/base/Elementwise.h"
#include "runtime/device/FusedCall.h"
#include "runtime/device/Segments.h"
#include "runtime/program/FusedBody.h"
#include "runtime/program/Layouts.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnGelu.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

constexpr int64_t kChunk = 512;

struct PreparedFused {
  FusedBody body;
  // Per broadcast load: the iteration space with adjacent dims merged where the input's strides
  // allow ([N, C, H, W] reading [N, C] walks as [N, C, H*W]), and the input's strides over it.
  std::vector<std::vector<int64_t>> shape, strides;
  std::vector<bool> direct;                    // load reads the input at the element's index
  std::vector<int> output;                     // the output instruction k computes into, or -1
};

// Where instruction k computes: p.output, but into a chunk of its own for an output that shares
// its memory with an input (a donated input updated in place, runtime::inPlaceOutputs), copied
// out at the chunk's end, after every instruction has read the chunk's inputs.
std::vector<int> outputsOf(const PreparedFused& p, const KernelCall& call) {
  std::vector<int> output = p.output;
  auto bytesOf = [](const TensorView& t) { return t.numel() * int64_t(dtypeSize(t.dtype)); };
  for (size_t o = 0; o < call.out.size(); ++o) {
    const std::byte* y = static_cast<const std::byte*>(call.out[o].data);
    const bool shared = std::any_of(call.in.begin(), call.in.end(), [&](const TensorView& in) {
      const std::byte* x = static_cast<const std::byte*>(in.data);
      return x < y + bytesOf(call.out[o]) && y < x + bytesOf(in);
    });
    if (shared) std::replace(output.begin(), output.end(), int(o), -1);
  }
  return output;
}

// A thread's scratch for one segment's chunks: instruction k's chunk in regs[k * kChunk...] (or
// wherever value[k] points: an input read in place, an output computed in place).
template <typename T>
struct ChunkScratch {
  std::vector<T> regs;
  std::vector<const T*> value;
  std::vector<int64_t> index;  // a broadcast load's position (blocked: rank 5)
  std::vector<int> output;     // outputsOf for the segment the scratch was set up for
  const KernelCall* call = nullptr;

  // Set up for `call`'s segment: its outputs, and its literals filled once.
  void prepare(const PreparedFused& p, const KernelCall& segment) {
    if (call == &segment) return;
    call = &segment;
    const size_t count = p.body.instrs.size();
    output = outputsOf(p, segment);
    regs.resize(count * kChunk);
    value.assign(count, nullptr);
    index.resize(segment.out[0].shape.size() + 1);
    for (size_t k = 0; k < count; ++k)
      if (p.body.instrs[k].kind == FusedOpKind::constant && output[k] < 0) {
        std::fill_n(regs.data() + k * kChunk, kChunk, static_cast<T>(p.body.instrs[k].value));
        value[k] = regs.data() + k * kChunk;
      }
  }
};

// Chunk c of the result: each instruction's loop over it, then the results not computed in place
// copied out.
template <typename T>
void evaluateChunk(const PreparedFused& p, const KernelCall& call, ChunkScratch<T>& scratch, int64_t c) {
  const std::vector<int>& output = scratch.output;
  std::vector<T>& regs = scratch.regs;
  std::vector<const T*>& value = scratch.value;
  std::vector<int64_t>& index = scratch.index;
  const int64_t n = call.out[0].numel();
  const size_t count = p.body.instrs.size();
  const int64_t base = c * kChunk, len = std::min(kChunk, n - base);
  for (size_t k = 0; k < count; ++k) {
    const FusedInstr& in = p.body.instrs[k];
    if (in.kind == FusedOpKind::load && p.direct[k]) {  // read in place, no copy
      value[k] = call.in[in.input].as<T>() + base;
      continue;
    }
    if (in.kind == FusedOpKind::load && !in.broadcast && call.in[in.input].dtype == DType::bf16) {
      T* r = regs.data() + k * kChunk;  // widened into the chunk (T is f32: fusedComputeType)
      if constexpr (std::is_same_v<T, float>) widenBf16Values(call.in[in.input].as<bf16>() + base, r, len);
      value[k] = r;
      continue;
    }
    if (in.kind == FusedOpKind::constant && output[k] < 0) continue;
    // Results are computed straight into their output where it shares no input's memory.
    T* __restrict r = output[k] >= 0 ? call.out[output[k]].as<T>() + base : regs.data() + k * kChunk;
    value[k] = r;
    const T* __restrict a = in.a >= 0 ? value[in.a] : nullptr;
    const T* __restrict b = in.b >= 0 ? value[in.b] : nullptr;
    switch (in.kind) {
      case FusedOpKind::load: {
        // Divide once per chunk for the first element's index, then step it like an
        // odometer: a broadcast of [N, C] over [N, C, H, W] costs a load, not four divisions.
        if (call.in[in.input].dtype == DType::bf16)
          throw Error("fused step (" + call.step.where() + ") broadcasts bf16 input " + std::to_string(in.input) +
                      "; the compiler widens bf16 values before it broadcasts them");
        const T* src = call.in[in.input].as<T>();
        const std::vector<int64_t>&walk = p.shape[k], &st = p.strides[k];
        const size_t rank = walk.size();
        int64_t offset = 0;
        for (size_t d = rank, e = static_cast<size_t>(base); d-- > 0;) {
          index[d] = static_cast<int64_t>(e) % walk[d];
          offset += index[d] * st[d];
          e /= static_cast<size_t>(walk[d]);
        }
        const int64_t inner = rank ? walk[rank - 1] : 1, innerStride = rank ? st[rank - 1] : 0;
        for (int64_t j = 0; j < len;) {
          const int64_t run = std::min(len - j, inner - (rank ? index[rank - 1] : 0));
          for (int64_t i = 0; i < run; ++i) r[j + i] = src[offset + i * innerStride];
          j += run;
          offset += run * innerStride;
          if (rank == 0) break;
          index[rank - 1] += run;
          for (size_t d = rank - 1; d > 0 && index[d] == walk[d]; --d) {  // carry
            offset += st[d - 1] - walk[d] * st[d];
            index[d] = 0;
            ++index[d - 1];
          }
        }
        break;
      }
      case FusedOpKind::constant:
        for (int64_t j = 0; j < len; ++j) r[j] = static_cast<T>(in.value);
        break;
      case FusedOpKind::round_bf16:
        if constexpr (std::is_same_v<T, float>) roundToBf16Values(a, r, len);
        break;
#define SPMD_FUSED_LOOP(name, Functor, arity, ...)                                \
  case FusedOpKind::name:                                                         \
    if constexpr (std::is_same_v<T, float> && kOwnF32<ew::Functor>)               \
      ownF32Values<ew::Functor>(a, b, r, len);                                    \
    else if constexpr (arity == 2)                                                \
      for (int64_t j = 0; j < len; ++j) r[j] = ew::Functor::apply(a[j], b[j]);    \
    else                                                                          \
      for (int64_t j = 0; j < len; ++j) r[j] = ew::Functor::apply(a[j], a[j]);    \
    break;
      SPMD_ELEMENTWISE_OPS(SPMD_FUSED_LOOP)
#undef SPMD_FUSED_LOOP
    }
  }
  for (size_t o = 0; o < call.out.size(); ++o) {  // results not computed in place
    const T* r = value[p.body.results[o]];
    if constexpr (std::is_same_v<T, float>)
      if (call.out[o].dtype == DType::bf16) {
        narrowToBf16Values(r, call.out[o].as<bf16>() + base, len);
        continue;
      }
    T* y = call.out[o].as<T>() + base;
    if (r != y) std::copy(r, r + len, y);
  }
}

int64_t chunksOf(const KernelCall& call) { return (call.out[0].numel() + kChunk - 1) / kChunk; }

// One parallel region over every chunk of the given segments (one fused step's, or the
// BatchFused step's many: the optimizer's per-parameter updates, where a region per segment
// cost more than the small ones' work); a thread takes a run of consecutive chunks, so it sets
// up for a new segment rarely. Elementwise: the same bits for any split.
template <typename T>
void evaluate(const std::vector<const PreparedFused*>& prepared, const std::vector<KernelCall>& segments) {
  std::vector<int64_t> first(segments.size() + 1, 0);  // the segments' first chunks, flattened
  for (size_t s = 0; s < segments.size(); ++s) first[s + 1] = first[s] + chunksOf(segments[s]);
  const int64_t chunks = first.back();
#pragma omp parallel if (chunks > 8)
  {
    ChunkScratch<T> scratch;
    size_t s = 0;
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      while (c >= first[s + 1]) ++s;  // a thread's chunks increase
      scratch.prepare(*prepared[s], segments[s]);
      evaluateChunk<T>(*prepared[s], segments[s], scratch, c - first[s]);
    }
  }
}


// One segment's body parsed and its loads planned, on its first call (kept in its cache slot).
const PreparedFused& preparedOf(KernelCall& call) {
  if (!call.cache) {
    auto p = std::make_shared<PreparedFused>();
    p->body = FusedBody::parse(attrsOf<FusedAttrs>(call.step).body);
    p->body.checkArity(call.in.size(), call.out.size());
    p->shape.resize(p->body.instrs.size());
    p->strides.resize(p->body.instrs.size());
    p->direct.resize(p->body.instrs.size());
    p->output.assign(p->body.instrs.size(), -1);
    for (size_t o = 0; o < p->body.results.size(); ++o)  // a bf16 output is rounded as it is copied out
      if (p->output[p->body.results[o]] < 0 && call.out[o].dtype != DType::bf16)
        p->output[p->body.results[o]] = static_cast<int>(o);
    for (size_t k = 0; k < p->body.instrs.size(); ++k) {
      const FusedInstr& in = p->body.instrs[k];
      if (in.kind != FusedOpKind::load) continue;
      p->direct[k] = !in.broadcast && call.in[in.input].dtype != DType::bf16;
      if (!in.broadcast) {
        loadStrides(in, call.in[in.input].shape, call.out[0].shape);  // checks the shapes
        continue;
      }
      if (!call.in[in.input].layout.empty())
        throw Error("fused step broadcasts input " + std::to_string(in.input) + " from the blocked layout " +
                    std::string(call.in[in.input].layout) + "; the compiler relays broadcast inputs to plain");
      std::vector<int64_t> st = loadStrides(in, call.in[in.input].shape, call.out[0].shape);
      std::vector<int64_t> space(call.out[0].shape.begin(), call.out[0].shape.end());
      if (const int64_t block = channelBlock(call.out[0].layout)) {
        // An nChw<B>c result is walked as [N, C/B, H, W, B]: the plain input moves B channels
        // per channel block and one per lane.
        space = {space[0], space[1] / block, space[2], space[3], block};
        st = {st[0], st[1] * block, st[2], st[3], st[1]};
      }
      for (size_t d = 0; d < space.size(); ++d) {
        if (!p->shape[k].empty() && p->strides[k].back() == space[d] * st[d]) {
          p->shape[k].back() *= space[d];  // dim d continues dim d-1's walk
          p->strides[k].back() = st[d];
          continue;
        }
        p->shape[k].push_back(space[d]);
        p->strides[k].push_back(st[d]);
      }
    }
    call.cache = p;
  }
  return *static_cast<const PreparedFused*>(call.cache.get());
}

}  // namespace

// A step of several segments (runtime/device/Segments.h: the optimizer's per-parameter updates)
// runs every segment's chunks in one parallel region; segments share one body, hence its dtype.
void fused(KernelCall& call) {
  std::vector<KernelCall> segments;
  std::vector<const PreparedFused*> prepared;
  if (segmentCount(call) > 1) {
    forEachSegment(call, [&](KernelCall& one) {
      prepared.push_back(&preparedOf(one));
      segments.push_back(one);
    });
  } else {
    prepared.push_back(&preparedOf(call));
    segments.push_back(call);
  }
  const DType compute = fusedComputeType(segments.front());
  for (const KernelCall& one : segments)
    if (one.out[0].dtype != segments.front().out[0].dtype || fusedComputeType(one) != compute)
      throw Error("fused step (" + call.step.where() + ") has segments of " +
                  std::string(dtypeName(segments.front().out[0].dtype)) + " and " +
                  std::string(dtypeName(one.out[0].dtype)) + " results; a step's segments share one body");
  visitFloat(compute, [&](auto tag) { evaluate<decltype(tag)>(prepared, segments); });
}

}  // namespace spmd::runtime::cpu
