// Reference matmul (optional transposes and bias), softmax and log_softmax along an axis, and
// per-example softmax cross-entropy.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/device/WidenedBf16.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

// log(sum_j exp(row[j])), shifted by the row's maximum, in double.
template <typename T>
double logSumExp(const T* row, int64_t n) {
  double top = *std::max_element(row, row + n), sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(double(row[j]) - top);
  return top + std::log(sum);
}

}  // namespace

void matmul(KernelCall& call) {
  if (call.in[0].dtype == DType::bf16) return widenedBf16<matmul>(call);  // f32 between roundings
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &a = call.in[0], &b = call.in[1], &c = call.out[0];
    const T* bias = call.in.size() > 2 ? call.in[2].as<T>() : nullptr;
    bool ta = attrsOf<MatmulAttrs>(call.step).transpose_lhs, tb = attrsOf<MatmulAttrs>(call.step).transpose_rhs;
    size_t r = c.rank() - 2;  // batched: [B, M, N]
    int64_t batch = r ? c.dim(0) : 1, m = c.dim(r), n = c.dim(r + 1), k = ta ? a.dim(r) : a.dim(r + 1);
    for (int64_t s = 0; s < batch; ++s) {
      const T *as = a.as<T>() + s * m * k, *bs = b.as<T>() + s * k * n;
      auto A = [&](int64_t i, int64_t p) { return double(as[ta ? p * m + i : i * k + p]); };
      auto B = [&](int64_t p, int64_t j) { return double(bs[tb ? j * k + p : p * n + j]); };
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double acc = bias ? bias[j] : 0.0;
          for (int64_t p = 0; p < k; ++p) acc += A(i, p) * B(p, j);
          c.as<T>()[s * m * n + i * n + j] = static_cast<T>(acc);
        }
    }
  });
}

namespace {

// softmax (or log_softmax) of every slice along the step's axis, through a gathered copy of
// the slice in double.
void axisSoftmax(KernelCall& call, bool log) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& x = call.in[0];
    int64_t axis = attrsOf<AxisAttrs>(call.step).axis, extent = x.dim(axis);
    int64_t inner = numElements(x.shape.subspan(axis + 1)), outer = numElements(x.shape.first(axis));
    std::vector<double> slice(extent);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t base = o * extent * inner + i;
        for (int64_t j = 0; j < extent; ++j) slice[j] = double(x.as<T>()[base + j * inner]);
        double top = slice.empty() ? 0.0 : slice[0];
        for (double v : slice) top = nanMax(top, v);
        double sum = 0;
        for (double v : slice) sum += std::exp(v - top);
        for (int64_t j = 0; j < extent; ++j)
          call.out[0].as<T>()[base + j * inner] =
              static_cast<T>(log ? slice[j] - top - std::log(sum) : std::exp(slice[j] - top) / sum);
      }
  });
}

}  // namespace

void softmax(KernelCall& call) { axisSoftmax(call, false); }
void log_softmax(KernelCall& call) { axisSoftmax(call, true); }

void softmax_cross_entropy(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &logits = call.in[0], &labels = call.in[1];
    int64_t rows = logits.dim(0), classes = logits.dim(1);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = logits.as<T>() + r * classes;
      int32_t label = labels.as<int32_t>()[r];
      checkLabel(label, r, classes);
      call.out[0].as<T>()[r] = static_cast<T>(logSumExp(row, classes) - double(row[label]));
    }
  });
}

// inputs: logits [N, C], labels [N], loss_grad [N]; output: (softmax - onehot) * loss_grad.
void softmax_cross_entropy_backward(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &logits = call.in[0], &labels = call.in[1];
    int64_t rows = logits.dim(0), classes = logits.dim(1);
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = logits.as<T>() + r * classes;
      T* out = call.out[0].as<T>() + r * classes;
      int32_t label = labels.as<int32_t>()[r];
      checkLabel(label, r, classes);
      double lse = logSumExp(row, classes), g = double(call.in[2].as<T>()[r]);
      for (int64_t j = 0; j < classes; ++j)
        out[j] = static_cast<T>((std::exp(double(row[j]) - lse) - (j == label)) * g);
    }
  });
}

}  // namespace spmd::runtime::reference
