// CPU softmax, log_softmax and softmax cross-entropy (forward and backward) as row loops, rows
// split across the OpenMP pool when large. In f32 each row runs our own vector code (OwnIsa.h,
// the same bits on every ISA): its maximum and its sum of ownExp(x - max) over 16 lanes (element j
// in lane j mod 16, in order; the lanes then added pairwise, 8 apart, 4 apart, ...); in f64 the
// rows are the plain loops of libm's exp (cross-entropy) or the kernel library's double loops
// (softmax), and so is a softmax along an axis other than the last.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/HostLoop.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnExp.h"
#include "runtime/kernels/Softmax.h"

namespace spmd::runtime::cpu {
namespace {

constexpr int64_t kThreadedElements = 1 << 15;  // row loops below this run on one thread
constexpr int kLanes = 16;

// The row's largest value; NaN where it holds one. Lane k folds elements k, k + 16, ... by
// nanMax, as two 8-lane vectors (GCC's vector extensions: the scalar form's NaN test stays a
// branch per element, ~40% of a cross-entropy row's time), then the lanes fold pairwise.
SPMD_ISA_BODY float rowMax(const float* x, int64_t n) {
  typedef float Lanes __attribute__((vector_size(kLanes / 2 * sizeof(float))));
  Lanes low, high;
  for (int k = 0; k < kLanes / 2; ++k) low[k] = high[k] = -INFINITY;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    Lanes a, b;
    std::memcpy(&a, x + j, sizeof a), std::memcpy(&b, x + j + kLanes / 2, sizeof b);
    low = (a > low) | (a != a) ? a : low;  // nanMax, lane by lane
    high = (b > high) | (b != b) ? b : high;
  }
  float lane[kLanes];
  std::memcpy(lane, &low, sizeof low), std::memcpy(lane + kLanes / 2, &high, sizeof high);
  for (int k = 0; j + k < n; ++k) lane[k] = nanMax(x[j + k], lane[k]);
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) lane[k] = nanMax(lane[k + width], lane[k]);
  return lane[0];
}

// The sum of ownExp(x[j] - top) in the lanes' order; each term also stored to out[j] if Store.
template <bool Store>
SPMD_ISA_BODY float expSum(const float* x, int64_t n, float top, float* out) {
  float lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const float e = ownExp(x[j + k] - top);
      if constexpr (Store) out[j + k] = e;
      lane[k] += e;
    }
  for (int k = 0; j + k < n; ++k) {
    const float e = ownExp(x[j + k] - top);
    if constexpr (Store) out[j + k] = e;
    lane[k] += e;
  }
  for (int width = kLanes / 2; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) lane[k] += lane[k + width];
  return lane[0];
}

SPMD_ISA_BODY void exps(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ownExp(x[i]);
}

// -log softmax(row)[label].
SPMD_ISA_BODY void crossEntropyRow(const float* row, int64_t classes, int32_t label, float* loss) {
  const float top = rowMax(row, classes);
  *loss = std::log(expSum<false>(row, classes, top, nullptr)) - (row[label] - top);
}

// (softmax(row) - onehot(label)) * grad.
SPMD_ISA_BODY void crossEntropyBackwardRow(const float* row, int64_t classes, int32_t label, float grad, float* out) {
  const float top = rowMax(row, classes);
  const float g = grad / expSum<true>(row, classes, top, out);
  for (int64_t j = 0; j < classes; ++j) out[j] *= g;
  out[label] -= grad;
}

template <bool Log>
SPMD_ISA_BODY void softmaxRow(const float* x, int64_t n, float* y) {
  const float top = rowMax(x, n);
  if constexpr (Log) {
    const float logSum = std::log(expSum<false>(x, n, top, nullptr));
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - top) - logSum;
  } else {
    const float sum = expSum<true>(x, n, top, y);
    for (int64_t j = 0; j < n; ++j) y[j] /= sum;
  }
}

template <bool Log>
void axisSoftmax(KernelCall& call) {
  const TensorView& x = call.in[0];
  const int64_t axis = attrsOf<AxisAttrs>(call.step).axis, extent = x.numel() ? x.dim(axis) : 0;
  if (x.dtype != DType::f32 || x.numel() == 0 || numElements(x.shape.subspan(axis + 1)) != 1)
    return kernels::axisSoftmax<HostLoop, Log>(call);
  const int64_t rows = x.numel() / extent;
  const float* in = x.as<float>();
  float* out = call.out[0].as<float>();
#pragma omp parallel for if (x.numel() >= kThreadedElements) schedule(static)
  for (int64_t r = 0; r < rows; ++r) onOwnIsa<softmaxRow<Log>>(in + r * extent, extent, out + r * extent);
}

// The step's labels, each checked against the classes before the threads start (they cannot throw).
const int32_t* checkedLabels(const KernelCall& call) {
  const int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  const int32_t* labels = call.in[1].as<int32_t>();
  for (int64_t r = 0; r < rows; ++r) checkLabel(labels[r], r, classes);
  return labels;
}

}  // namespace

void ownExpValues(const float* x, float* y, int64_t n) { onOwnIsa<exps>(x, y, n); }

void softmax(KernelCall& call) { axisSoftmax<false>(call); }
void log_softmax(KernelCall& call) { axisSoftmax<true>(call); }

void softmax_cross_entropy(KernelCall& call) {
  const int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  const int32_t* labels = checkedLabels(call);
  if (call.in[0].dtype == DType::f32) {
    const float* logits = call.in[0].as<float>();
    float* loss = call.out[0].as<float>();
#pragma omp parallel for if (rows * classes >= kThreadedElements) schedule(static)
    for (int64_t r = 0; r < rows; ++r) onOwnIsa<crossEntropyRow>(logits + r * classes, classes, labels[r], loss + r);
    return;
  }
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for if (rows * classes >= kThreadedElements) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = call.in[0].as<T>() + r * classes;
      T top = *std::max_element(row, row + classes);
      T sum = 0;
      for (int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - top);
      call.out[0].as<T>()[r] = std::log(sum) - (row[labels[r]] - top);
    }
  });
}

// (softmax(logits) - onehot(labels)) * loss_grad, row by row.
void softmax_cross_entropy_backward(KernelCall& call) {
  const int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  const int32_t* labels = checkedLabels(call);
  if (call.in[0].dtype == DType::f32) {
    const float *logits = call.in[0].as<float>(), *grad = call.in[2].as<float>();
    float* out = call.out[0].as<float>();
#pragma omp parallel for if (rows * classes >= kThreadedElements) schedule(static)
    for (int64_t r = 0; r < rows; ++r)
      onOwnIsa<crossEntropyBackwardRow>(logits + r * classes, classes, labels[r], grad[r], out + r * classes);
    return;
  }
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
#pragma omp parallel for if (rows * classes >= kThreadedElements) schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = call.in[0].as<T>() + r * classes;
      T* out = call.out[0].as<T>() + r * classes;
      T top = *std::max_element(row, row + classes);
      T sum = 0;
      for (int64_t j = 0; j < classes; ++j) sum += (out[j] = std::exp(row[j] - top));
      T g = call.in[2].as<T>()[r] / sum;
      for (int64_t j = 0; j < classes; ++j) out[j] *= g;
      out[labels[r]] -= call.in[2].as<T>()[r];
    }
  });
}

}  // namespace spmd::runtime::cpu
