// Reductions of the CUDA backend and the simulator, in double (as the reference), and argmax and
// argsort along one axis (its sort: runtime/kernels/Sort.h). An output of at least kBlockTreeThreads reduced elements is a two-stage
// reduction (runtime/kernels/Slices.h): blocks over (output, slice), each thread summing a strided
// share of its slice and the block's tree combining them, then a thread per output folding its
// slices in order (a conv bias's gradient over N*H*W was a single thread's loop: 8 ms of a 190 ms
// step on an H100; then one block per output, 64 blocks for 64 channels). Smaller ones take a
// thread each.
// Adjacent dims that are reduced (or kept) together and contiguous merge into one first, so a
// walk divides once per dim group. The order of the sums depends on the shape alone: a
// channels-last input ("nhwc") is walked by its dims' strides in the same logical order, so it
// gives the plain input's bits.
#pragma once

#include <algorithm>
#include <vector>

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Divide.h"
#include "runtime/kernels/Launch.h"
#include "runtime/kernels/Slices.h"
#include "runtime/kernels/Sort.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

constexpr int kMaxReduceRank = 8;

// The input split into kept dims (indexed by the output element) and reduced dims.
struct Split {
  int kept, reduced;
  int64_t keptDims[kMaxReduceRank], keptStrides[kMaxReduceRank];
  int64_t reducedDims[kMaxReduceRank], reducedStrides[kMaxReduceRank];
  int64_t reducedCount;
  // Below 2^32 reduced elements an output's walk divides by invariant integers (Divide.h): four
  // 64-bit divisions per element (N and H*W of a bias gradient) made it 20x its memory time.
  bool narrow = false;
  Divider byReduced[kMaxReduceRank];
};

inline Split splitAxes(const TensorView& x, const std::vector<int64_t>& axes) {
  if (x.rank() > static_cast<size_t>(kMaxReduceRank))
    throw Error("GPU reductions support rank <= 8, got rank " + std::to_string(x.rank()));
  Split s{0, 0, {}, {}, {}, {}, 1, false, {}};
  const std::vector<int64_t> strides = layoutStrides(x.layout, x.shape);
  int last = -1;  // whether the previous dim was reduced (1) or kept (0)
  for (size_t d = 0; d < x.rank(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    int64_t* dims = reduced ? s.reducedDims : s.keptDims;
    int64_t* dimStrides = reduced ? s.reducedStrides : s.keptStrides;
    int& count = reduced ? s.reduced : s.kept;
    if (last == int(reduced) && dimStrides[count - 1] == strides[d] * x.dim(d)) {  // same group, contiguous: merge
      dims[count - 1] *= x.dim(d);
      dimStrides[count - 1] = strides[d];
    } else {
      dims[count] = x.dim(d), dimStrides[count++] = strides[d];
    }
    if (reduced) s.reducedCount *= x.dim(d);
    last = int(reduced);
  }
  if (s.reducedCount > 0 && s.reducedCount <= int64_t(UINT32_MAX)) {
    s.narrow = true;
    for (int d = 0; d < s.reduced; ++d) s.byReduced[d] = dividerOf(uint32_t(s.reducedDims[d]));
  }
  return s;
}

// The same for the index-th reduced element of `s`, without a division where the split is narrow.
SPMD_HOST_DEVICE inline int64_t reducedOffset(const Split& s, int64_t index) {
  if (!s.narrow) return offsetOf(s.reducedDims, s.reducedStrides, s.reduced, index);
  uint32_t at = uint32_t(index);
  int64_t offset = 0;
  for (int d = s.reduced - 1; d >= 0; --d) {
    const uint32_t q = s.byReduced[d].quotient(at);
    offset += int64_t(at - q * uint32_t(s.reducedDims[d])) * s.reducedStrides[d];
    at = q;
  }
  return offset;
}

enum class ReduceKind { Sum, Mean, Max };

// The reduction's identity and one step of it, in double.
SPMD_HOST_DEVICE inline double reduceIdentity(ReduceKind kind) { return kind == ReduceKind::Max ? -HUGE_VAL : 0.0; }
SPMD_HOST_DEVICE inline double reduceStep(ReduceKind kind, double acc, double v) {
  return kind == ReduceKind::Max ? nanMax(acc, v) : acc + v;
}

template <typename T>
struct ReduceFn {
  const T* x;
  T* y;
  Split s;
  ReduceKind kind;
  SPMD_HOST_DEVICE void operator()(int64_t o) const {
    int64_t base = offsetOf(s.keptDims, s.keptStrides, s.kept, o);
    double acc = reduceIdentity(kind);
    for (int64_t r = 0; r < s.reducedCount; ++r)
      acc = reduceStep(kind, acc, x[base + reducedOffset(s, r)]);
    y[o] = static_cast<T>(kind == ReduceKind::Mean ? acc / double(s.reducedCount) : acc);
  }
};

struct MaxOfDoubles {
  SPMD_HOST_DEVICE double operator()(double a, double b) const { return nanMax(a, b); }
};

// Stage 1: a block per (output, slice) (a grid-stride loop over them): thread t combines elements
// t, t + B, ... of its slice of the output's reduced elements, then the block's tree combines the
// B results into partial[output * slices + slice]. A thread loads four elements before it adds
// them (in order, so the bits are a plain loop's): one load in flight per thread leaves most of
// a GPU's memory bandwidth unused.
template <typename T>
struct ReduceSliceFn {
  const T* x;
  Split s;
  Slices sl;
  ReduceKind kind;
  int64_t outputs;
  double* partial;
  template <class Block>
  SPMD_HOST_DEVICE void operator()(Block& b) const {
    for (int64_t blk = b.block(); blk < outputs * sl.slices; blk += b.gridSize()) {
      const int64_t o = blk / sl.slices, slice = blk % sl.slices, end = sl.end(slice);
      const int64_t base = offsetOf(s.keptDims, s.keptStrides, s.kept, o);
      double acc = reduceIdentity(kind);
      const int64_t step = b.blockSize();
      int64_t r = sl.begin(slice) + b.thread();
      for (; r + 3 * step < end; r += 4 * step) {  // four loads in flight, summed in the same order
        const double v0 = double(x[base + reducedOffset(s, r)]), v1 = double(x[base + reducedOffset(s, r + step)]),
                     v2 = double(x[base + reducedOffset(s, r + 2 * step)]),
                     v3 = double(x[base + reducedOffset(s, r + 3 * step)]);
        acc = reduceStep(kind, reduceStep(kind, reduceStep(kind, reduceStep(kind, acc, v0), v1), v2), v3);
      }
      for (; r < end; r += step) acc = reduceStep(kind, acc, x[base + reducedOffset(s, r)]);
      acc = kind == ReduceKind::Max ? blockReduce(b, acc, MaxOfDoubles{}) : blockSum(b, acc);
      if (b.thread() == 0) partial[blk] = acc;
    }
  }
};

// Stage 2: a thread per output combines its slices in order.
template <typename T>
struct ReduceFinishFn {
  const double* partial;
  T* y;
  Slices sl;
  ReduceKind kind;
  SPMD_HOST_DEVICE void operator()(int64_t o) const {
    double acc = reduceIdentity(kind);
    for (int64_t slice = 0; slice < sl.slices; ++slice) acc = reduceStep(kind, acc, partial[o * sl.slices + slice]);
    y[o] = static_cast<T>(kind == ReduceKind::Mean ? acc / double(sl.count) : acc);
  }
};

template <typename T>
struct ArgmaxFn {
  const T* x;
  int32_t* y;
  Split s;
  SPMD_HOST_DEVICE void operator()(int64_t o) const {
    int64_t base = offsetOf(s.keptDims, s.keptStrides, s.kept, o);
    int32_t best = 0;
    T bestValue = x[base];
    for (int64_t r = 1; r < s.reducedCount; ++r) {
      T v = x[base + r * s.reducedStrides[0]];
      if (argmaxTakes(v, bestValue)) bestValue = v, best = static_cast<int32_t>(r);
    }
    y[o] = best;
  }
};

template <class Api>
void reduce(KernelCall& call, ReduceKind kind) {
  Split s = splitAxes(call.in[0], attrsOf<AxesAttrs>(call.step).axes);
  const int64_t outputs = call.out[0].numel();
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr bool blocks = requires(KernelCall& c, const Launch& l, const ReduceSliceFn<T>& f) {
      Api::forBlocks(c, l, f);
    };  // the CPU backend's HostLoop has none: it takes the thread-per-output walk
    if (!blocks || s.reducedCount < kBlockTreeThreads) {
      Api::forEach(call, outputs, ReduceFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), s, kind});
      return;
    }
    if constexpr (blocks) {
      const Slices sl = slicesOf(s.reducedCount);
      double* partial = reinterpret_cast<double*>(scratch<Api>(call, size_t(outputs * sl.slices) * sizeof(double)));
      const Launch launch{"ReduceSliceFn", std::min<int64_t>(outputs * sl.slices, 65535 * 8), kBlockTreeThreads, 0,
                          kBlockTreeThreads * sizeof(double), call.in[0].numel(), true, true};
      Api::forBlocks(call, launch, ReduceSliceFn<T>{call.in[0].as<T>(), s, sl, kind, outputs, partial});
      Api::forEach(call, outputs, ReduceFinishFn<T>{partial, call.out[0].as<T>(), sl, kind});
    }
  });
}

template <class Api> void reduce_sum(KernelCall& call) { reduce<Api>(call, ReduceKind::Sum); }
template <class Api> void reduce_mean(KernelCall& call) { reduce<Api>(call, ReduceKind::Mean); }
template <class Api> void reduce_max(KernelCall& call) { reduce<Api>(call, ReduceKind::Max); }

template <class Api>
void argmax(KernelCall& call) {
  Split s = splitAxes(call.in[0], {attrsOf<AxisAttrs>(call.step).axis});
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), ArgmaxFn<T>{call.in[0].as<T>(), call.out[0].as<int32_t>(), s});
  });
}

template <class Api>
void argsort(KernelCall& call) {
  const SortAttrs& a = attrsOf<SortAttrs>(call.step);
  const TensorView& x = call.in[0];
  const int64_t extent = x.dim(a.axis), inner = numElements(x.shape.subspan(a.axis + 1));
  int32_t* other = extent > kArgsortCountUpTo
                       ? reinterpret_cast<int32_t*>(scratch<Api>(call, size_t(x.numel()) * sizeof(int32_t)))
                       : nullptr;
  visitFloat(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    argsortRows<Api>(call, x.as<T>(), call.out[0].as<int32_t>(), other, x.numel(), extent, inner, a.descending);
  });
}

#define SPMD_LIBRARY_REDUCE_OPS(X) X(reduce_sum) X(reduce_mean) X(reduce_max) X(argmax) X(argsort)

}  // namespace spmd::runtime::kernels
