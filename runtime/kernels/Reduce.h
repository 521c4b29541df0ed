// Reductions of the CUDA backend and the simulator: one functor call per output element walks
// its reduced elements (double accumulation, as the reference), and argmax along one axis.
// Correct for any axes; a block-per-output version is future work (the ResNet step spends
// little time here).
#pragma once

#include <algorithm>
#include <vector>

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

constexpr int kMaxReduceRank = 8;

// The input split into kept dims (indexed by the output element) and reduced dims.
struct Split {
  int kept, reduced;
  int64_t keptDims[kMaxReduceRank], keptStrides[kMaxReduceRank];
  int64_t reducedDims[kMaxReduceRank], reducedStrides[kMaxReduceRank];
  int64_t reducedCount;
};

inline Split splitAxes(const TensorView& x, const std::vector<int64_t>& axes) {
  if (x.rank() > static_cast<size_t>(kMaxReduceRank))
    throw Error("GPU reductions support rank <= 8, got rank " + std::to_string(x.rank()));
  Split s{0, 0, {}, {}, {}, {}, 1};
  std::vector<int64_t> strides(x.rank(), 1);
  for (size_t d = x.rank(); d-- > 1;) strides[d - 1] = strides[d] * x.dim(d);
  for (size_t d = 0; d < x.rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    if (reduced) {
      s.reducedDims[s.reduced] = x.dim(d), s.reducedStrides[s.reduced++] = strides[d];
      s.reducedCount *= x.dim(d);
    } else {
      s.keptDims[s.kept] = x.dim(d), s.keptStrides[s.kept++] = strides[d];
    }
  }
  return s;
}

// Offset of the index-th element of a row-major walk over `dims` laid out with `strides`.
SPMD_HOST_DEVICE inline int64_t offsetOf(const int64_t* dims, const int64_t* strides, int rank, int64_t index) {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return offset;
}

enum class ReduceKind { Sum, Mean, Max };

template <typename T>
struct ReduceFn {
  const T* x;
  T* y;
  Split s;
  ReduceKind kind;
  SPMD_HOST_DEVICE void operator()(int64_t o) const {
    int64_t base = offsetOf(s.keptDims, s.keptStrides, s.kept, o);
    double acc = kind == ReduceKind::Max ? -HUGE_VAL : 0.0;
    for (int64_t r = 0; r < s.reducedCount; ++r) {
      double v = x[base + offsetOf(s.reducedDims, s.reducedStrides, s.reduced, r)];
      acc = kind == ReduceKind::Max ? nanMax(acc, v) : acc + v;
    }
    y[o] = static_cast<T>(kind == ReduceKind::Mean ? acc / double(s.reducedCount) : acc);
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
  Split s = splitAxes(call.in[0], call.step.ints("axes"));
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), ReduceFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), s, kind});
  });
}

template <class Api> void reduce_sum(KernelCall& call) { reduce<Api>(call, ReduceKind::Sum); }
template <class Api> void reduce_mean(KernelCall& call) { reduce<Api>(call, ReduceKind::Mean); }
template <class Api> void reduce_max(KernelCall& call) { reduce<Api>(call, ReduceKind::Max); }

template <class Api>
void argmax(KernelCall& call) {
  Split s = splitAxes(call.in[0], {call.step.integer("axis")});
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(), ArgmaxFn<T>{call.in[0].as<T>(), call.out[0].as<int32_t>(), s});
  });
}

#define SPMD_LIBRARY_REDUCE_OPS(X) X(reduce_sum) X(reduce_mean) X(reduce_max) X(argmax)

}  // namespace spmd::runtime::kernels
