// Reference reductions over a set of axes (sum, mean, max) and argmax along one axis.
#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/base/Index.h"
#include "runtime/reference/Reference.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::reference {
namespace {

// Linear index into the reduced output for an input multi-index.
int64_t reducedIndex(std::span<const int64_t> index, std::span<const int64_t> shape,
                     const std::vector<int64_t>& axes) {
  int64_t out = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end())
      out = out * shape[d] + index[d];
  return out;
}

enum class Kind { sum, mean, max };

void reduce(KernelCall& call, Kind kind) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &x = call.in[0], &y = call.out[0];
    const auto& axes = attrsOf<AxesAttrs>(call.step).axes;
    double init = kind == Kind::max ? -std::numeric_limits<double>::infinity() : 0.0;
    std::vector<double> acc(y.numel(), init);
    forEachIndex(x.shape, [&](std::span<const int64_t> index, int64_t linear) {
      double& a = acc[reducedIndex(index, x.shape, axes)];
      double v = x.as<T>()[linear];
      a = kind == Kind::max ? nanMax(a, v) : a + v;
    });
    double count = double(x.numel()) / double(std::max<int64_t>(y.numel(), 1));
    for (int64_t i = 0; i < y.numel(); ++i)
      y.as<T>()[i] = static_cast<T>(kind == Kind::mean ? acc[i] / count : acc[i]);
  });
}

}  // namespace

void reduce_sum(KernelCall& call) { reduce(call, Kind::sum); }
void reduce_mean(KernelCall& call) { reduce(call, Kind::mean); }
void reduce_max(KernelCall& call) { reduce(call, Kind::max); }

void argmax(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &x = call.in[0], &y = call.out[0];
    int64_t axis = attrsOf<AxisAttrs>(call.step).axis;
    std::vector<double> best(y.numel(), -std::numeric_limits<double>::infinity());
    std::vector<int32_t> arg(y.numel(), -1);
    forEachIndex(x.shape, [&](std::span<const int64_t> index, int64_t linear) {
      int64_t out = reducedIndex(index, x.shape, {axis});
      double v = x.as<T>()[linear];
      if (arg[out] < 0 || argmaxTakes(v, best[out])) {
        best[out] = v;
        arg[out] = static_cast<int32_t>(index[axis]);
      }
    });
    std::copy(arg.begin(), arg.end(), y.as<int32_t>());
  });
}

// Per row, std::stable_sort of the indices by NanRules' sortsBefore.
void argsort(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView &x = call.in[0], &y = call.out[0];
    const SortAttrs& a = attrsOf<SortAttrs>(call.step);
    const int64_t extent = x.dim(a.axis), inner = numElements(x.shape.subspan(a.axis + 1));
    const int64_t rows = extent ? x.numel() / extent : 0;
    std::vector<int32_t> order(size_t(extent), 0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = (r / inner) * extent * inner + r % inner;
      const T* row = x.as<T>() + base;
      for (int64_t j = 0; j < extent; ++j) order[size_t(j)] = int32_t(j);
      std::stable_sort(order.begin(), order.end(), [&](int32_t p, int32_t q) {
        return sortsBefore(row[p * inner], row[q * inner], a.descending);
      });
      for (int64_t j = 0; j < extent; ++j) y.as<int32_t>()[base + j * inner] = order[size_t(j)];
    }
  });
}

}  // namespace spmd::runtime::reference
