// take_along_axis (numpy.take_along_axis, torch.gather: input's elements at i32 indices along one
// axis) and its backward for the CUDA backend, the simulator and the CPU backend. Both view the
// tensors as [outer, axis, inner]: input [outer, size, inner], indices and result
// [outer, count, inner]. The backward (also spmd::scatterAdd's scatter) checks its indices as the
// forward does, then gathers: input-gradient element (o, v, i) sums, in index order, the
// result-gradient elements (o, j, i) whose index is v, so no two calls write one element and the
// sum does not depend on thread timing; its cost is input elements x count. scatter and
// scatter_reduce gather the same way: result element (o, v, i) starts from input's and takes, in
// index order, each update whose index is v (the last one, or the max / min of them all).
#pragma once

#include "runtime/kernels/Common.h"
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

// Records the first index outside [0, size) (the backward's check; the gather skips such ones).
struct AxisIndexCheckFn {
  const int32_t* indices;
  int64_t size;
  BadIndexFlag* bad;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { indexValid(indices[i], i, size, bad); }
};

template <typename T>
struct TakeAlongAxisBackwardFn {
  const T* dy;
  const int32_t* indices;
  T* dx;
  AxisView v;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t outer = i / (v.size * v.inner), place = i / v.inner % v.size, inner = i % v.inner;
    double sum = 0;
    for (int64_t j = 0; j < v.count; ++j) {
      const int64_t at = (outer * v.count + j) * v.inner + inner;
      if (indices[at] == place) sum += double(dy[at]);
    }
    dx[i] = static_cast<T>(sum);
  }
};

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

// A scatter's result element: input's, then each update pointing at it in index order, written
// (Fold::Write) or folded by max / min (NaN propagates, runtime/base/NanRules.h).
enum class ScatterFold { Write, Max, Min };

template <typename T>
struct ScatterFn {
  const T* input;
  const int32_t* indices;
  const T* updates;
  T* out;
  AxisView v;
  ScatterFold fold;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t outer = i / (v.size * v.inner), place = i / v.inner % v.size, inner = i % v.inner;
    T r = input[i];
    for (int64_t j = 0; j < v.count; ++j) {
      const int64_t at = (outer * v.count + j) * v.inner + inner;
      if (indices[at] != place) continue;
      r = fold == ScatterFold::Write ? updates[at] : fold == ScatterFold::Max ? nanMax(r, updates[at]) : nanMin(r, updates[at]);
    }
    out[i] = r;
  }
};

// inputs: input, indices, updates; output: result (input's shape).
template <class Api>
void scatterWith(KernelCall& call, int64_t axis, ScatterFold fold) {
  const AxisView v = axisView(call.out[0], call.in[1], axis);
  withIndexCheck<Api>(
      call,
      [&](BadIndexFlag* flag) {
        Api::forEach(call, call.in[1].numel(), AxisIndexCheckFn{call.in[1].as<int32_t>(), v.size, flag});
        visitFloat(call.in[0].dtype, [&](auto tag) {
          using T = decltype(tag);
          Api::forEach(call, call.out[0].numel(),
                       ScatterFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.in[2].as<T>(), call.out[0].as<T>(), v, fold});
        });
      },
      [size = v.size](int index, int64_t position) { checkTakeIndex(index, position, size); });
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
  const AxisView v = axisView(call.out[0], call.in[1], attrsOf<AxisAttrs>(call.step).axis);
  withIndexCheck<Api>(
      call,
      [&](BadIndexFlag* flag) {
        Api::forEach(call, call.in[1].numel(), AxisIndexCheckFn{call.in[1].as<int32_t>(), v.size, flag});
        visitFloat(call.in[0].dtype, [&](auto tag) {
          using T = decltype(tag);
          Api::forEach(call, call.out[0].numel(),
                       TakeAlongAxisBackwardFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.out[0].as<T>(), v});
        });
      },
      [size = v.size](int index, int64_t position) { checkTakeIndex(index, position, size); });
}

#define SPMD_LIBRARY_TAKE_ALONG_AXIS_OPS(X) \
  X(take_along_axis) X(take_along_axis_backward) X(scatter) X(scatter_reduce)

}  // namespace spmd::runtime::kernels
