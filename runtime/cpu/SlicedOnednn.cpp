// oneDNN on fixed slices of the batch, one thread a slice (runtime/cpu/SlicedOnednn.h).
//
// Every primitive here is made while the calling thread's OpenMP threads are set to 1, so oneDNN
// plans it for one thread (its primitive cache keys on that count), and each slice runs it on
// one pool thread with its own stream, memory objects and scratchpad (user-managed: oneDNN's
// own scratchpad may not be shared between threads). Every layout the compiler gives an
// activation keeps the batch outermost, so slice s is the rows [s * size, ...) of the buffer.
// Where oneDNN has only its reference loops for a convolution's layouts (a plain 32-channel input
// beside a blocked result: ~500x slower than its direct kernels), the slices run on copies of the
// activations in layouts it has a kernel for (stagedConv).
#include "runtime/cpu/SlicedOnednn.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <exception>
#include <optional>
#include <string_view>
#include <type_traits>
#include <vector>

#include "runtime/cpu/Onednn.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu::sliced {
namespace {

constexpr int64_t kMostSlices = 16;
// The least multiply-adds a slice is given (about 0.2 ms on one core): a smaller slice costs more
// in oneDNN's per-call work, and a filter gradient's in partial sums, than it spreads.
constexpr int64_t kSliceWork = int64_t{8} << 20;
std::atomic<int64_t> sliceWork{kSliceWork};
// Kernels made whose primitives are oneDNN's reference loops (referenceKernels()).
std::atomic<int64_t> referenceKernelsMade{0};
// The most bytes a filter gradient's per-slice partial sums may take together.
constexpr int64_t kPartialBytes = int64_t{64} << 20;

// `rows` cut into `count` slices of `size` rows (the last may be shorter): a rule of the shape
// alone, at most `most` slices.
struct Slices {
  int64_t rows, size, count;
  Slices(int64_t rows_, int64_t most) : rows(rows_) {
    const int64_t wanted = std::clamp<int64_t>(std::min(most, rows), 1, kMostSlices);
    size = (rows + wanted - 1) / wanted;
    count = (rows + size - 1) / size;
  }
  int64_t begin(int64_t s) const { return s * size; }
  int64_t length(int64_t s) const { return std::min(size, rows - s * size); }
};

// Makes `make()` (a primitive descriptor or primitive) with the calling thread's OpenMP threads
// set to one, so oneDNN plans for one thread.
template <typename Make>
auto oneThread(Make&& make) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  try {
    auto made = make();
    omp_set_num_threads(threads);
    return made;
  } catch (...) {
    omp_set_num_threads(threads);
    throw;
  }
}

// `v`'s descriptor (its own layout) with its outermost dimension `n`.
dnnl::memory::desc withRows(const TensorView& v, int64_t n) {
  std::vector<int64_t> shape(v.shape.begin(), v.shape.end());
  shape[0] = n;
  TensorView slice = v;
  slice.shape = shape;
  return layoutDesc(slice);
}

// Row `row` of `v` (blocked layouts pad their channel blocks: a row's bytes as oneDNN lays it).
void* rowsOf(const TensorView& v, int64_t row) {
  return static_cast<std::byte*>(v.data) + row * int64_t(withRows(v, 1).get_size());
}

// One slice's own stream, memory objects and scratchpad.
struct SliceRun {
  int primitive = 0;  // which of Slicing::primitives
  dnnl::stream stream;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::byte> scratch;
};

// oneDNN's reference implementation ("ref:any"): what it falls back to where none of its kernels
// takes the operands' layouts.
template <typename PrimitiveDesc>
bool isReference(const PrimitiveDesc& pd) {
  return std::string_view(pd.impl_info_str()).starts_with("ref");
}

// The slices' primitives (one for the full slices, one more when the last is shorter) and runs.
struct Slicing {
  std::optional<Slices> slices;
  std::vector<dnnl::primitive> primitives;
  std::vector<SliceRun> runs;
  bool reference = false;  // a primitive is oneDNN's reference loops

  // `make(n)`: the primitive descriptor for n rows, its scratchpad mode user. `args`: the
  // DNNL_ARG_*s each slice binds (descriptors as the primitive wants them).
  template <typename Primitive, typename Make>
  void build(const Slices& s, const std::vector<int>& args, Make&& make) {
    slices = s;
    const int64_t lengths[2] = {s.size, s.length(s.count - 1)};
    std::vector<typename Primitive::primitive_desc> pds;
    for (int i = 0; i < (lengths[1] == lengths[0] ? 1 : 2); ++i) {
      pds.push_back(oneThread([&] { return make(lengths[i]); }));
      reference = reference || isReference(pds.back());
      primitives.push_back(oneThread([&] { return Primitive(pds.back()); }));
    }
    for (int64_t k = 0; k < s.count; ++k) {
      SliceRun run;
      run.primitive = s.length(k) == lengths[0] ? 0 : 1;
      const auto& pd = pds[run.primitive];
      run.stream = dnnl::stream(engine());
      for (int arg : args) run.args[arg] = dnnl::memory(pd.query_md(dnnl::query::exec_arg_md, arg), engine(), nullptr);
      const auto scratch = pd.scratchpad_desc();
      if (scratch.get_size()) {
        run.scratch.resize(scratch.get_size());
        run.args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(scratch, engine(), run.scratch.data());
      }
      runs.push_back(std::move(run));
    }
  }

  // Every slice on the pool: `bind(k, args)` sets slice k's data handles, then its primitive
  // runs on that pool thread alone. The first error is thrown after the loop.
  template <typename Bind>
  void execute(Bind&& bind) {
    std::exception_ptr failed;
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t k = 0; k < slices->count; ++k) {
      omp_set_num_threads(1);  // whatever oneDNN asks the pool for inside: this thread alone
      try {
        SliceRun& run = runs[k];
        bind(k, run.args);
        primitives[run.primitive].execute(run.stream, run.args);
        run.stream.wait();
      } catch (...) {
#pragma omp critical(spmd_sliced_error)
        if (!failed) failed = std::current_exception();
      }
    }
    if (failed) std::rethrow_exception(failed);
  }
};

dnnl::primitive_attr userScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// The slices of a convolution over `x` (input) and `y` (result) with filter `w`: enough
// multiply-adds each (kSliceWork), at most `most`.
Slices convSlices(const TensorView& x, const TensorView& w, const TensorView& y, int64_t most) {
  const int64_t perImage = numElements(y.shape) / y.dim(0) * numElements(w.shape) / w.dim(0);
  const int64_t work = std::max<int64_t>(1, perImage) * x.dim(0);
  return Slices(x.dim(0), std::min(most, work / sliceWork.load()));
}

// The forward convolution of a slice of n images: the step's own (`bias`) or the hint a backward
// primitive is derived from.
dnnl::convolution_forward::desc forwardDesc(const Step& step, const TensorView& x, const dnnl::memory::desc& filter,
                                            const TensorView& y, int64_t n, const TensorView* bias = nullptr) {
  using namespace dnnl;
  const ConvGeometry g(step);
  if (bias)
    return {prop_kind::forward_training, algorithm::convolution_direct, withRows(x, n), filter,
            plainDesc(bias->shape, bias->dtype), withRows(y, n), g.strides, g.padding, g.padding};
  return {prop_kind::forward_training, algorithm::convolution_direct, withRows(x, n), filter, withRows(y, n),
          g.strides, g.padding, g.padding};
}

// A convolution's slices and its filter (the layout the first slice's primitive chose, given to
// the last one's too).
struct ConvState {
  Slicing plan;
  std::optional<dnnl::memory::desc> filter;
  std::optional<Relayout> relaid;  // the filter between its plain buffer and `filter`
  // The two activations (stagedConv's order) between the step's buffers and the slices' copies
  // (in `stagedLayouts`), where the slices run on copies.
  std::array<std::optional<Relayout>, 2> staged;
  std::array<const char*, 2> stagedLayouts = {nullptr, nullptr};

  // Activation `i` as the slices see it: its copy (an input, `copyIn`, copied in first), or `v`.
  TensorView slicesView(size_t i, const TensorView& v, dnnl::stream& stream, bool copyIn) {
    if (!staged[i]) return v;
    TensorView copy = v;
    copy.layout = stagedLayouts[i];
    copy.data = staged[i]->internal.get_data_handle();
    if (copyIn) staged[i]->run(stream, v.data, false);
    return copy;
  }
  // Copies output activation `i` from the slices' copy into the step's buffer `data`, where it is one.
  void copyOut(size_t i, void* data, dnnl::stream& stream) {
    if (staged[i]) staged[i]->run(stream, data, true);
  }
};

// A convolution's state from `build(state, a, b)` on its two activations `a` and `b` (`outputs`:
// which one it writes) in the step's own layouts; where oneDNN has only its reference loops for
// those, built again on copies of them in other layouts (plain, nChw8c, nChw16c: oneDNN's
// preferred block first), copied in and out around the slices (copies: the slices' bits whatever
// the threads), in the first pair of layouts oneDNN has a kernel of its own for.
template <typename State, typename Build>
State stagedConv(const TensorView& a, const TensorView& b, std::array<bool, 2> outputs, Build&& build) {
  auto conv = [](State& s) -> ConvState& {
    if constexpr (std::is_same_v<State, ConvState>) return s;
    else return s.conv;
  };
  State state;
  build(state, a, b);
  if (!conv(state).plan.reference) return state;
  const bool prefers8 = preferredChannelBlock() == 8;
  const char* layouts[3] = {prefers8 ? "nChw8c" : "nChw16c", prefers8 ? "nChw16c" : "nChw8c", ""};
  const TensorView* own[2] = {&a, &b};
  for (const char* la : layouts)
    for (const char* lb : layouts) {
      if (la == a.layout && lb == b.layout) continue;
      TensorView copies[2] = {a, b};
      copies[0].layout = la, copies[1].layout = lb;
      State other;
      build(other, copies[0], copies[1]);
      ConvState& c = conv(other);
      if (c.plan.reference) continue;
      for (size_t i = 0; i < 2; ++i)
        if (copies[i].layout != own[i]->layout) {
          c.stagedLayouts[i] = copies[i].layout.data();
          c.staged[i].emplace(layoutDesc(*own[i]), layoutDesc(copies[i]), outputs[i]);
        }
      return other;
    }
  ++referenceKernelsMade;
  return state;
}

// The filter of a slice's primitive: the first slice's choice once it made one.
dnnl::memory::desc filterOf(const ConvState& s, const TensorView& w, DType type) {
  return s.filter ? *s.filter : anyDesc(w.shape, type);
}

// Runs a forward or backward-data convolution's slices: the filter reordered from the step's
// plain one (a copy: the same bits on any threads), then slice k of `in` (DNNL_ARG `inArg`,
// stagedConv's first activation) into slice k of `out` (`outArg`, its second).
void runFiltered(ConvState& s, const TensorView& w, int inArg, const TensorView& in, int outArg, const TensorView& out,
                 const TensorView* bias = nullptr) {
  dnnl::stream stream(engine());
  s.relaid->run(stream, w.data, false);
  const TensorView from = s.slicesView(0, in, stream, true), to = s.slicesView(1, out, stream, false);
  stream.wait();
  void* filter = s.relaid->internal.get_data_handle();
  const Slices& slices = *s.plan.slices;
  s.plan.execute([&](int64_t k, std::unordered_map<int, dnnl::memory>& args) {
    args[inArg].set_data_handle(rowsOf(from, slices.begin(k)));
    args[DNNL_ARG_WEIGHTS].set_data_handle(filter);
    if (bias) args[DNNL_ARG_BIAS].set_data_handle(bias->data);
    args[outArg].set_data_handle(rowsOf(to, slices.begin(k)));
  });
  s.copyOut(1, out.data, stream);
  stream.wait();
}

}  // namespace

void setSliceWork(int64_t multiplyAdds) { sliceWork = multiplyAdds > 0 ? multiplyAdds : kSliceWork; }

int64_t referenceKernels() { return referenceKernelsMade.load(); }

bool runs(const KernelCall& call) { return call.in[0].dtype == DType::f32 || call.in[0].dtype == DType::bf16; }

// inputs: input, filter, bias (optional); output: result
void conv2d(KernelCall& call) {
  const TensorView &x = call.in[0], &w = call.in[1], &y = call.out[0];
  const TensorView* bias = call.in.size() > 2 ? &call.in[2] : nullptr;
  auto& s = cachedState<ConvState>(call, [&] {
    return stagedConv<ConvState>(x, y, {false, true}, [&](ConvState& state, const TensorView& x, const TensorView& y) {
      std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
      if (bias) args.push_back(DNNL_ARG_BIAS);
      state.plan.build<dnnl::convolution_forward>(convSlices(x, w, y, kMostSlices), args, [&](int64_t n) {
        dnnl::convolution_forward::primitive_desc pd(
            forwardDesc(call.step, x, filterOf(state, w, w.dtype), y, n, bias), userScratchpad(), engine());
        if (!state.filter) state.filter = pd.weights_desc();
        return pd;
      });
      state.relaid.emplace(plainDesc(w.shape, w.dtype), *state.filter, false);
    });
  });
  runFiltered(s, w, DNNL_ARG_SRC, x, DNNL_ARG_DST, y, bias);
}

// inputs: result_grad, filter; output: input_grad
void backwardData(KernelCall& call) {
  const TensorView &dy = call.in[0], &w = call.in[1], &dx = call.out[0];
  auto& s = cachedState<ConvState>(call, [&] {
    return stagedConv<ConvState>(dy, dx, {false, true}, [&](ConvState& state, const TensorView& dy, const TensorView& dx) {
      state.plan.build<dnnl::convolution_backward_data>(
          convSlices(dx, w, dy, kMostSlices), {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, [&](int64_t n) {
            using namespace dnnl;
            const ConvGeometry g(call.step);
            const memory::desc filter = filterOf(state, w, w.dtype);
            convolution_forward::primitive_desc hint(forwardDesc(call.step, dx, filter, dy, n), engine());
            convolution_backward_data::primitive_desc pd(
                convolution_backward_data::desc(algorithm::convolution_direct, withRows(dx, n), filter,
                                                withRows(dy, n), g.strides, g.padding, g.padding),
                userScratchpad(), engine(), hint);
            if (!state.filter) state.filter = pd.weights_desc();
            return pd;
          });
      state.relaid.emplace(plainDesc(w.shape, w.dtype), *state.filter, false);
    });
  });
  runFiltered(s, w, DNNL_ARG_DIFF_DST, dy, DNNL_ARG_DIFF_SRC, dx);
}

namespace {

// The filter gradient's slices write f32 partial gradients (whatever the step's type), summed in
// slice order into `relaid`'s buffer (or the result, when that is already the layout).
struct FilterState {
  ConvState conv;
  std::vector<float> partials;
  int64_t elements = 0;  // of one partial, padding included
};

}  // namespace

// inputs: input, result_grad; output: filter_grad
void backwardFilter(KernelCall& call) {
  const TensorView &x = call.in[0], &dy = call.in[1], &dw = call.out[0];
  auto& s = cachedState<FilterState>(call, [&] {
    return stagedConv<FilterState>(x, dy, {false, false}, [&](FilterState& state, const TensorView& x, const TensorView& dy) {
      ConvState& conv = state.conv;
      const int64_t filterBytes = numElements(dw.shape) * int64_t(sizeof(float));
      const Slices slices = convSlices(x, dw, dy, kPartialBytes / std::max<int64_t>(filterBytes, 1));
      conv.plan.build<dnnl::convolution_backward_weights>(
          slices, {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}, [&](int64_t n) {
            using namespace dnnl;
            const ConvGeometry g(call.step);
            convolution_forward::primitive_desc hint(forwardDesc(call.step, x, anyDesc(dw.shape, x.dtype), dy, n),
                                                     engine());
            convolution_backward_weights::primitive_desc pd(
                convolution_backward_weights::desc(algorithm::convolution_direct, withRows(x, n),
                                                   filterOf(conv, dw, DType::f32), withRows(dy, n), g.strides,
                                                   g.padding, g.padding),
                userScratchpad(), engine(), hint);
            if (!conv.filter) conv.filter = pd.diff_weights_desc();
            return pd;
          });
      conv.relaid.emplace(plainDesc(dw.shape, dw.dtype), *conv.filter, true);
      state.elements = int64_t(conv.filter->get_size() / sizeof(float));
      state.partials.resize(size_t(slices.count * state.elements));
    });
  });
  const Slices& slices = *s.conv.plan.slices;
  float* partials = s.partials.data();
  const int64_t E = s.elements;
  dnnl::stream stream(engine());
  const TensorView xs = s.conv.slicesView(0, x, stream, true), dys = s.conv.slicesView(1, dy, stream, true);
  stream.wait();
  s.conv.plan.execute([&](int64_t k, std::unordered_map<int, dnnl::memory>& args) {
    args[DNNL_ARG_SRC].set_data_handle(rowsOf(xs, slices.begin(k)));
    args[DNNL_ARG_DIFF_DST].set_data_handle(rowsOf(dys, slices.begin(k)));
    args[DNNL_ARG_DIFF_WEIGHTS].set_data_handle(partials + k * E);
  });
  Relayout& out = *s.conv.relaid;
  out.plain.set_data_handle(dw.data);
  float* sum = static_cast<float*>(out.reorder ? out.internal.get_data_handle() : dw.data);
  const int64_t count = slices.count;
  constexpr int64_t kChunk = 4096;
#pragma omp parallel for
  for (int64_t e0 = 0; e0 < E; e0 += kChunk)
    for (int64_t e = e0; e < std::min(E, e0 + kChunk); ++e) {
      float acc = partials[e];
      for (int64_t k = 1; k < count; ++k) acc += partials[k * E + e];
      sum[e] = acc;
    }
  out.run(stream, dw.data, true);
  stream.wait();
}

namespace {

// A descriptor's dims and strides (plain: oneDNN's blocking strides), and its element size.
struct Operand {
  dnnl::memory::dims dims, strides;
  dnnl::memory::data_type type;
  explicit Operand(const dnnl::memory::desc& md) : type(static_cast<dnnl::memory::data_type>(md.data.data_type)) {
    for (int i = 0; i < md.data.ndims; ++i) {
      dims.push_back(md.data.dims[i]);
      strides.push_back(md.data.format_desc.blocking.strides[i]);
    }
  }
  // The first `n` of its outermost dimension, or all of it when `whole`.
  dnnl::memory::desc slice(int64_t n, bool whole) const {
    dnnl::memory::dims d = dims;
    if (!whole) d[0] = n;
    return {d, type, strides};
  }
  // Bytes from its start to outermost index `i`.
  int64_t offset(int64_t i) const { return i * strides[0] * int64_t(dnnl::memory::data_type_size(type)); }
};

void* at(void* base, int64_t bytes) { return static_cast<std::byte*>(base) + bytes; }

}  // namespace

struct Gemm::Plan {
  Slicing slicing;
  Operand src, weights, dst;
  bool batched, bias;
};

Gemm::Gemm(const dnnl::memory::desc& src, const dnnl::memory::desc& weights, const dnnl::memory::desc& dst,
           bool accumulate, const dnnl::memory::desc* bias) {
  plan_ = std::make_shared<Plan>(Plan{{}, Operand(src), Operand(weights), Operand(dst), dst.data.ndims == 3, bias != nullptr});
  Plan& p = *plan_;
  int64_t work = p.src.dims.back();  // the reduction
  for (int64_t d : p.dst.dims) work *= d;
  const Slices slices(p.dst.dims[0], work / sliceWork.load());
  dnnl::primitive_attr attr = userScratchpad();
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
  if (bias) args.push_back(DNNL_ARG_BIAS);
  p.slicing.build<dnnl::matmul>(slices, args, [&](int64_t n) {
    const auto a = p.src.slice(n, false), b = p.weights.slice(n, !p.batched), c = p.dst.slice(n, false);
    const auto desc = bias ? dnnl::matmul::desc(a, b, *bias, c) : dnnl::matmul::desc(a, b, c);
    return dnnl::matmul::primitive_desc(desc, attr, engine());
  });
  if (p.slicing.reference) ++referenceKernelsMade;
}

void Gemm::run(std::initializer_list<std::pair<int, void*>> pointers) {
  Plan& p = *plan_;
  void *src = nullptr, *weights = nullptr, *dst = nullptr, *bias = nullptr;
  for (auto [arg, pointer] : pointers) {
    if (arg == DNNL_ARG_SRC) src = pointer;
    if (arg == DNNL_ARG_WEIGHTS) weights = pointer;
    if (arg == DNNL_ARG_DST) dst = pointer;
    if (arg == DNNL_ARG_BIAS) bias = pointer;
  }
  const Slices& slices = *p.slicing.slices;
  p.slicing.execute([&](int64_t k, std::unordered_map<int, dnnl::memory>& args) {
    const int64_t first = slices.begin(k);
    args[DNNL_ARG_SRC].set_data_handle(at(src, p.src.offset(first)));
    args[DNNL_ARG_WEIGHTS].set_data_handle(p.batched ? at(weights, p.weights.offset(first)) : weights);
    args[DNNL_ARG_DST].set_data_handle(at(dst, p.dst.offset(first)));
    if (p.bias) args[DNNL_ARG_BIAS].set_data_handle(bias);
  });
}

// inputs: lhs, rhs, bias (optional); output: result. Rank 2 ([M, K] x [K, N]) is sliced by the
// result's rows; batched ([B, M, K] x [B, K, N]) by the batch.
void matmul(KernelCall& call) {
  const TensorView &a = call.in[0], &b = call.in[1], &c = call.out[0];
  const bool hasBias = call.in.size() > 2;
  auto& gemm = cachedState<Gemm>(call, [&] {
    using namespace dnnl;
    using dims = memory::dims;
    const bool ta = attrsOf<MatmulAttrs>(call.step).transpose_lhs, tb = attrsOf<MatmulAttrs>(call.step).transpose_rhs;
    const size_t r = c.rank() - 2;
    const int64_t m = c.dim(r), n = c.dim(r + 1), k = ta ? a.dim(r) : a.dim(r + 1);
    const auto type = dnnlType(a.dtype);
    const memory::desc lhs = r ? memory::desc({c.dim(0), m, k}, type, ta ? dims{m * k, 1, m} : dims{m * k, k, 1})
                               : memory::desc({m, k}, type, ta ? dims{1, m} : dims{k, 1});
    const memory::desc rhs = r ? memory::desc({c.dim(0), k, n}, type, tb ? dims{k * n, 1, k} : dims{k * n, n, 1})
                               : memory::desc({k, n}, type, tb ? dims{1, k} : dims{n, 1});
    const memory::desc out = r ? memory::desc({c.dim(0), m, n}, type, dims{m * n, n, 1})
                               : memory::desc({m, n}, type, dims{n, 1});
    const memory::desc bias = r ? memory::desc({1, 1, n}, type, memory::format_tag::abc)
                                : memory::desc({1, n}, type, memory::format_tag::ab);
    return Gemm(lhs, rhs, out, false, hasBias ? &bias : nullptr);
  });
  if (hasBias)
    gemm.run({{DNNL_ARG_SRC, a.data}, {DNNL_ARG_WEIGHTS, b.data}, {DNNL_ARG_DST, c.data}, {DNNL_ARG_BIAS, call.in[2].data}});
  else
    gemm.run({{DNNL_ARG_SRC, a.data}, {DNNL_ARG_WEIGHTS, b.data}, {DNNL_ARG_DST, c.data}});
}

}  // namespace spmd::runtime::cpu::sliced
