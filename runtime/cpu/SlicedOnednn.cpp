// oneDNN on fixed slices of the batch, one thread a slice (runtime/cpu/SlicedOnednn.h).
//
// Every primitive here is made while the calling thread's OpenMP threads are set to 1, so oneDNN
// plans it for one thread (its primitive cache keys on that count), and each slice runs it on
// one pool thread with its own stream, memory objects and scratchpad (user-managed: oneDNN's
// own scratchpad may not be shared between threads). Every layout the compiler gives an
// activation keeps the batch outermost, so slice s is the rows [s * size, ...) of the buffer.
#include "runtime/cpu/SlicedOnednn.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <vector>

#include "runtime/cpu/Onednn.h"

namespace spmd::runtime::cpu::sliced {
namespace {

constexpr int64_t kMostSlices = 16;
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
  int primitive = 0;  // which of Plan::primitives
  dnnl::stream stream;
  std::unordered_map<int, dnnl::memory> args;
  std::vector<std::byte> scratch;
};

// The slices' primitives (one for the full slices, one more when the last is shorter) and runs.
struct Plan {
  std::optional<Slices> slices;
  std::vector<dnnl::primitive> primitives;
  std::vector<SliceRun> runs;

  // `make(n)`: the primitive descriptor for n rows, its scratchpad mode user. `args`: the
  // DNNL_ARG_*s each slice binds (descriptors as the primitive wants them).
  template <typename Primitive, typename Make>
  void build(const Slices& s, const std::vector<int>& args, Make&& make) {
    slices = s;
    const int64_t lengths[2] = {s.size, s.length(s.count - 1)};
    std::vector<typename Primitive::primitive_desc> pds;
    for (int i = 0; i < (lengths[1] == lengths[0] ? 1 : 2); ++i) {
      pds.push_back(oneThread([&] { return make(lengths[i]); }));
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
  Plan plan;
  std::optional<dnnl::memory::desc> filter;
  std::optional<Relayout> relaid;  // the filter between its plain buffer and `filter`
};

// The filter of a slice's primitive: the first slice's choice once it made one.
dnnl::memory::desc filterOf(const ConvState& s, const TensorView& w, DType type) {
  return s.filter ? *s.filter : anyDesc(w.shape, type);
}

// The slices' filter, reordered from the step's plain one (a copy: the same bits on any threads).
void* relaidFilter(ConvState& s, const TensorView& w) {
  dnnl::stream stream(engine());
  s.relaid->run(stream, w.data, false);
  stream.wait();
  return s.relaid->internal.get_data_handle();
}

}  // namespace

bool runs(const KernelCall& call) { return call.in[0].dtype == DType::f32 || call.in[0].dtype == DType::bf16; }

// inputs: input, filter, bias (optional); output: result
void conv2d(KernelCall& call) {
  const TensorView &x = call.in[0], &w = call.in[1], &y = call.out[0];
  const TensorView* bias = call.in.size() > 2 ? &call.in[2] : nullptr;
  auto& s = cachedState<ConvState>(call, [&] {
    ConvState state;
    std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    if (bias) args.push_back(DNNL_ARG_BIAS);
    state.plan.build<dnnl::convolution_forward>(Slices(x.dim(0), kMostSlices), args, [&](int64_t n) {
      dnnl::convolution_forward::primitive_desc pd(
          forwardDesc(call.step, x, filterOf(state, w, w.dtype), y, n, bias), userScratchpad(), engine());
      if (!state.filter) state.filter = pd.weights_desc();
      return pd;
    });
    state.relaid.emplace(plainDesc(w.shape, w.dtype), *state.filter, false);
    return state;
  });
  void* filter = relaidFilter(s, w);
  const Slices& slices = *s.plan.slices;
  s.plan.execute([&](int64_t k, std::unordered_map<int, dnnl::memory>& args) {
    args[DNNL_ARG_SRC].set_data_handle(rowsOf(x, slices.begin(k)));
    args[DNNL_ARG_WEIGHTS].set_data_handle(filter);
    if (bias) args[DNNL_ARG_BIAS].set_data_handle(bias->data);
    args[DNNL_ARG_DST].set_data_handle(rowsOf(y, slices.begin(k)));
  });
}

// inputs: result_grad, filter; output: input_grad
void backwardData(KernelCall& call) {
  const TensorView &dy = call.in[0], &w = call.in[1], &dx = call.out[0];
  auto& s = cachedState<ConvState>(call, [&] {
    ConvState state;
    state.plan.build<dnnl::convolution_backward_data>(
        Slices(dy.dim(0), kMostSlices), {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC}, [&](int64_t n) {
          using namespace dnnl;
          const ConvGeometry g(call.step);
          const memory::desc filter = filterOf(state, w, w.dtype);
          convolution_forward::primitive_desc hint(forwardDesc(call.step, dx, filter, dy, n), engine());
          convolution_backward_data::primitive_desc pd(
              convolution_backward_data::desc(algorithm::convolution_direct, withRows(dx, n), filter, withRows(dy, n),
                                              g.strides, g.padding, g.padding),
              userScratchpad(), engine(), hint);
          if (!state.filter) state.filter = pd.weights_desc();
          return pd;
        });
    state.relaid.emplace(plainDesc(w.shape, w.dtype), *state.filter, false);
    return state;
  });
  void* filter = relaidFilter(s, w);
  const Slices& slices = *s.plan.slices;
  s.plan.execute([&](int64_t k, std::unordered_map<int, dnnl::memory>& args) {
    args[DNNL_ARG_DIFF_DST].set_data_handle(rowsOf(dy, slices.begin(k)));
    args[DNNL_ARG_WEIGHTS].set_data_handle(filter);
    args[DNNL_ARG_DIFF_SRC].set_data_handle(rowsOf(dx, slices.begin(k)));
  });
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
    FilterState state;
    ConvState& conv = state.conv;
    const int64_t filterBytes = numElements(dw.shape) * int64_t(sizeof(float));
    const Slices slices(x.dim(0), std::max<int64_t>(1, kPartialBytes / std::max<int64_t>(filterBytes, 1)));
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
    return state;
  });
  const Slices& slices = *s.conv.plan.slices;
  float* partials = s.partials.data();
  const int64_t E = s.elements;
  s.conv.plan.execute([&](int64_t k, std::unordered_map<int, dnnl::memory>& args) {
    args[DNNL_ARG_SRC].set_data_handle(rowsOf(x, slices.begin(k)));
    args[DNNL_ARG_DIFF_DST].set_data_handle(rowsOf(dy, slices.begin(k)));
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
  dnnl::stream stream(engine());
  out.run(stream, dw.data, true);
  stream.wait();
}

// inputs: lhs, rhs, bias (optional); output: result. Rank 2 ([M, K] x [K, N]) is sliced by the
// result's rows; batched ([B, M, K] x [B, K, N]) by the batch.
void matmul(KernelCall& call) {
  const TensorView &a = call.in[0], &b = call.in[1], &c = call.out[0];
  const TensorView* bias = call.in.size() > 2 ? &call.in[2] : nullptr;
  const bool ta = call.step.flag("transpose_lhs"), tb = call.step.flag("transpose_rhs");
  const size_t r = c.rank() - 2;
  const int64_t m = c.dim(r), n = c.dim(r + 1), k = ta ? a.dim(r) : a.dim(r + 1), batch = r ? c.dim(0) : 1;
  const int64_t size = int64_t(dtypeSize(a.dtype));
  auto& s = cachedState<Plan>(call, [&] {
    using namespace dnnl;
    using dims = memory::dims;
    const auto type = dnnlType(a.dtype);
    // Enough products a slice to pay for its call: about 64K multiply-adds.
    const Slices slices(r ? batch : m, batch * m * n * k / (int64_t{1} << 16));
    Plan plan;
    std::vector<int> args = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    if (bias) args.push_back(DNNL_ARG_BIAS);
    plan.build<dnnl::matmul>(slices, args, [&](int64_t len) {
      memory::desc lhs = r ? memory::desc({len, m, k}, type, ta ? dims{m * k, 1, m} : dims{m * k, k, 1})
                           : memory::desc({len, k}, type, ta ? dims{1, m} : dims{k, 1});
      memory::desc rhs = r ? memory::desc({len, k, n}, type, tb ? dims{k * n, 1, k} : dims{k * n, n, 1})
                           : memory::desc({k, n}, type, tb ? dims{1, k} : dims{n, 1});
      memory::desc out = r ? memory::desc({len, m, n}, type, dims{m * n, n, 1}) : memory::desc({len, n}, type, dims{n, 1});
      if (!bias) return dnnl::matmul::primitive_desc(dnnl::matmul::desc(lhs, rhs, out), userScratchpad(), engine());
      memory::desc biasDesc = r ? memory::desc({1, 1, n}, type, memory::format_tag::abc)
                                : memory::desc({1, n}, type, memory::format_tag::ab);
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(lhs, rhs, biasDesc, out), userScratchpad(), engine());
    });
    return plan;
  });
  const Slices& slices = *s.slices;
  auto at = [](const TensorView& v, int64_t elements, int64_t bytes) {
    return static_cast<void*>(static_cast<std::byte*>(v.data) + elements * bytes);
  };
  s.execute([&](int64_t i, std::unordered_map<int, dnnl::memory>& args) {
    const int64_t first = slices.begin(i);
    args[DNNL_ARG_SRC].set_data_handle(at(a, r ? first * m * k : (ta ? first : first * k), size));
    args[DNNL_ARG_WEIGHTS].set_data_handle(at(b, r ? first * k * n : 0, size));
    args[DNNL_ARG_DST].set_data_handle(at(c, r ? first * m * n : first * n, size));
    if (bias) args[DNNL_ARG_BIAS].set_data_handle(bias->data);
  });
}

}  // namespace spmd::runtime::cpu::sliced
