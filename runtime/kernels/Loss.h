// Softmax cross-entropy and its backward for the CUDA backend and the simulator: one functor
// call per row (10 classes in the flagship model), double accumulation as the reference. A
// label out of range is recorded in a device flag and reported, after the step (by the executor,
// at the end of the call, where it takes deferred checks), as the same error the CPU backend
// gives; until then the row's loss and gradient are 0, never uninitialised memory.
#pragma once

#include <cmath>

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

template <typename T>
SPMD_HOST_DEVICE inline double logSumExp(const T* row, int64_t classes) {
  double top = row[0];
  for (int64_t c = 1; c < classes; ++c) top = row[c] > top ? double(row[c]) : top;
  double sum = 0;
  for (int64_t c = 0; c < classes; ++c) sum += ::exp(double(row[c]) - top);
  return top + ::log(sum);
}

SPMD_HOST_DEVICE inline bool labelValid(int32_t label, int64_t row, int64_t classes, BadIndexFlag* bad) {
  return indexValid(label, row, classes, bad);
}

template <typename T>
struct LossFn {
  const T* logits;
  const int32_t* labels;
  T* loss;
  int64_t classes;
  BadIndexFlag* bad;
  SPMD_HOST_DEVICE void operator()(int64_t r) const {
    if (!labelValid(labels[r], r, classes, bad)) {
      loss[r] = T(0);
      return;
    }
    const T* row = logits + r * classes;
    loss[r] = static_cast<T>(logSumExp(row, classes) - double(row[labels[r]]));
  }
};

template <typename T>
struct LossBackwardFn {
  const T* logits;
  const int32_t* labels;
  const T* dloss;
  T* dlogits;
  int64_t classes;
  BadIndexFlag* bad;
  SPMD_HOST_DEVICE void operator()(int64_t r) const {
    int32_t label = labels[r];
    if (!labelValid(label, r, classes, bad)) {  // reported after the step; the row's gradient is 0 until then
      for (int64_t c = 0; c < classes; ++c) dlogits[r * classes + c] = T(0);
      return;
    }
    const T* row = logits + r * classes;
    double lse = logSumExp(row, classes);
    for (int64_t c = 0; c < classes; ++c)
      dlogits[r * classes + c] =
          static_cast<T>((::exp(double(row[c]) - lse) - (c == label ? 1.0 : 0.0)) * double(dloss[r]));
  }
};

// Runs `launch(flag)` and throws the CPU backend's message for the first bad label.
template <class Api, typename Launch>
void withLabelCheck(KernelCall& call, Launch launch) {
  int64_t classes = call.in[0].dim(1);
  withIndexCheck<Api>(call, launch, [classes](int label, int64_t row) { checkLabel(label, row, classes); });
}

template <class Api>
void softmax_cross_entropy(KernelCall& call) {
  int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  withLabelCheck<Api>(call, [&](BadIndexFlag* flag) {
    visitFloat(call.in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      Api::forEach(call, rows, LossFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.out[0].as<T>(), classes, flag});
    });
  });
}

template <class Api>
void softmax_cross_entropy_backward(KernelCall& call) {
  int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  withLabelCheck<Api>(call, [&](BadIndexFlag* flag) {
    visitFloat(call.in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      Api::forEach(call, rows, LossBackwardFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.in[2].as<T>(),
                                                 call.out[0].as<T>(), classes, flag});
    });
  });
}

#define SPMD_LIBRARY_LOSS_OPS(X) X(softmax_cross_entropy) X(softmax_cross_entropy_backward)

}  // namespace spmd::runtime::kernels
