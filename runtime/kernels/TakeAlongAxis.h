// take_along_axis (numpy.take_along_axis, torch.gather: input's elements at i32 indices along one
// axis) and its backward for the CUDA backend, the simulator and the CPU backend. Both view the
// tensors as [outer, axis, inner]: input [outer, size, inner], indices and result
// [outer, count, inner]. The backward (also spmd::scatterAdd's scatter) checks its indices as the
// forward does, then gathers: input-gradient element (o, v, i) sums, in index order, the
// result-gradient elements (o, j, i) whose index is v, so no two calls write one element and the
// sum does not depend on thread timing. scatter and scatter_reduce gather the same way: result
// element (o, v, i) starts from input's and takes, in index order, each update whose index is v
// (the last one, or the max / min of them all). Up to kScatterScanUpTo indices a column, each
// result element scans its column's indices (input elements x count in all); beyond, each
// column's indices are sorted first (stable, runtime/kernels/Sort.h) and a binary search finds a
// place's run (count x log2(count)^2 + input elements x log2(count) + count): the same updates in
// the same order, so the same bits.
#pragma once

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Sort.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

struct AxisView {
  int64_t size, count, inner;  // input's extent along the axis, the indices', the elements after it
};

// input [outer, size, inner], indices [outer, count, inner] as the step's shapes give them.
inline AxisView axisView(const TensorView& input, const TensorView& indices, int64_t axis) {
  return {input.dim(axis), indices.dim(axis), numElements(input.shape.subspan(axis + 1))};
}

template <typename T>
struct TakeAlongAxisFn {
  const T* input;
  const int32_t* indices;
  T* out;
  AxisView v;
  BadIndexFlag* bad;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t outer = i / (v.count * v.inner), inner = i % v.inner;
    const int32_t index = indices[i];
    out[i] = indexValid(index, i, v.size, bad) ? input[(outer * v.size + index) * v.inner + inner] : T(0);
  }
};

inline constexpr int64_t kScatterScanUpTo = 64;

// The updates pointing at a place, in index order: with `order` (each column's indices sorted,
// stable), the place's run from a binary search; without, every index of the column, to be
// compared with the place. Column `base` is the (outer, inner) column's first element.
struct PlaceUpdates {
  const int32_t* indices;
  const int32_t* order;  // null: scan
  AxisView v;
  SPMD_HOST_DEVICE int64_t at(int64_t base, int64_t p) const {
    return base + (order ? int64_t(order[base + p * v.inner]) : p) * v.inner;
  }
  SPMD_HOST_DEVICE int64_t first(int64_t base, int64_t place) const {
    if (!order) return 0;
    int64_t lo = 0, hi = v.count;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (indices[at(base, mid)] < place) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
  // Whether the walk from first() ends at p: sorted, at the first index past the place.
  SPMD_HOST_DEVICE bool pastRun(int64_t base, int64_t p, int64_t place) const {
    return order && indices[at(base, p)] != place;
  }
};

template <typename T>
struct TakeAlongAxisBackwardFn {
  const T* dy;
  T* dx;
  PlaceUpdates u;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const AxisView& v = u.v;
    const int64_t outer = i / (v.size * v.inner), place = i / v.inner % v.size, inner = i % v.inner;
    const int64_t base = outer * v.count * v.inner + inner;
    double sum = 0;
    for (int64_t p = u.first(base, place); p < v.count && !u.pastRun(base, p, place); ++p) {
      const int64_t at = u.at(base, p);
      if (u.indices[at] == place) sum += double(dy[at]);
    }
    dx[i] = static_cast<T>(sum);
  }
};

// A scatter's result element: input's, then each update pointing at it in index order, written
// (ScatterFold::Write) or folded by max / min (NaN propagates, runtime/base/NanRules.h).
enum class ScatterFold { Write, Max, Min };

template <typename T>
struct ScatterFn {
  const T* input;
  const T* updates;
  T* out;
  PlaceUpdates u;
  ScatterFold fold;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const AxisView& v = u.v;
    const int64_t outer = i / (v.size * v.inner), place = i / v.inner % v.size, inner = i % v.inner;
    const int64_t base = outer * v.count * v.inner + inner;
    T r = input[i];
    for (int64_t p = u.first(base, place); p < v.count && !u.pastRun(base, p, place); ++p) {
      const int64_t at = u.at(base, p);
      if (u.indices[at] != place) continue;
      r = fold == ScatterFold::Write ? updates[at] : fold == ScatterFold::Max ? nanMax(r, updates[at]) : nanMin(r, updates[at]);
    }
    out[i] = r;
  }
};

// Checks a scatter's indices (inputs[1]) against result's axis, then queues `gather(updates)`
// with the column walk its count takes (the sort queued first where it sorts).
template <class Api, typename Gather>
void scatterGather(KernelCall& call, const TensorView& result, int64_t axis, Gather gather) {
  const AxisView v = axisView(result, call.in[1], axis);
  const int64_t n = call.in[1].numel();
  const bool sorted = v.count > kScatterScanUpTo;
  // Sorted: the order, then the buffer its merge passes alternate with (Sort.h).
  const size_t work = sorted ? size_t(2 * n) * sizeof(int32_t) : 0;
  withIndexCheck<Api>(
      call,
      [&](BadIndexFlag* flag) {
        const int32_t* indices = call.in[1].as<int32_t>();
        Api::forEach(call, n, AxisIndexCheckFn{indices, v.size, flag});
        int32_t* order = nullptr;
        if (sorted) {
          order = reinterpret_cast<int32_t*>(indexCheckWork(flag));
          argsortRows<Api>(call, indices, order, order + n, n, v.count, v.inner, false);
        }
        gather(PlaceUpdates{indices, order, v});
      },
      [size = v.size](int index, int64_t position) { checkTakeIndex(index, position, size); }, work);
}

// inputs: input, indices, updates; output: result (input's shape).
template <class Api>
void scatterWith(KernelCall& call, int64_t axis, ScatterFold fold) {
  scatterGather<Api>(call, call.out[0], axis, [&](const PlaceUpdates& u) {
    visitFloat(call.in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      Api::forEach(call, call.out[0].numel(),
                   ScatterFn<T>{call.in[0].as<T>(), call.in[2].as<T>(), call.out[0].as<T>(), u, fold});
    });
  });
}

template <class Api>
void scatter(KernelCall& call) {
  scatterWith<Api>(call, attrsOf<AxisAttrs>(call.step).axis, ScatterFold::Write);
}

template <class Api>
void scatter_reduce(KernelCall& call) {
  const ScatterReduceAttrs& a = attrsOf<ScatterReduceAttrs>(call.step);
  scatterWith<Api>(call, a.axis, a.reduction == Reduction::Max ? ScatterFold::Max : ScatterFold::Min);
}

// inputs: result_grad, indices; output: input_grad.
template <class Api>
void take_along_axis_backward(KernelCall& call) {
  scatterGather<Api>(call, call.out[0], attrsOf<AxisAttrs>(call.step).axis, [&](const PlaceUpdates& u) {
    visitFloat(call.in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      Api::forEach(call, call.out[0].numel(), TakeAlongAxisBackwardFn<T>{call.in[0].as<T>(), call.out[0].as<T>(), u});
    });
  });
}

// inputs: input, indices; output: result (the indices' shape).
template <class Api>
void take_along_axis(KernelCall& call) {
  const AxisView v = axisView(call.in[0], call.in[1], attrsOf<AxisAttrs>(call.step).axis);
  withIndexCheck<Api>(
      call,
      [&](BadIndexFlag* flag) {
        visitFloat(call.in[0].dtype, [&](auto tag) {
          using T = decltype(tag);
          Api::forEach(call, call.out[0].numel(),
                       TakeAlongAxisFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.out[0].as<T>(), v, flag});
        });
      },
      [size = v.size](int index, int64_t position) { checkTakeIndex(index, position, size); });
}

#define SPMD_LIBRARY_TAKE_ALONG_AXIS_OPS(X) \
  X(take_along_axis) X(take_along_axis_backward) X(scatter) X(scatter_reduce)

}  // namespace spmd::runtime::kernels
