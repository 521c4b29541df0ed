// CPU reductions (sum, mean, max over a set of axes): one pass over the input in memory order,
// accumulating in double into the output slot each element maps to.
#include <algorithm>
#include <limits>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/device/Layouts.h"

namespace spmd::runtime::cpu {
namespace {

enum class Kind { sum, mean, max };

void reduce(KernelCall& call, Kind kind) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    TensorView x = call.in[0];
    const TensorView& y = call.out[0];
    std::vector<int64_t> axes = call.step.ints("axes"), blocked;
    if (int64_t block = channelBlock(x.layout)) {
      // A per-channel reduction of nChw<B>c (the only blocked one the compiler assigns, see
      // runtime/device/Layouts.h): the buffer is row-major [N, C/B, H, W, B], and keeping dims 1
      // and 4 lists the channels in order.
      if (axes != std::vector<int64_t>{0, 2, 3})
        throw Error("reduce over axes " + shapeString(axes) + " of a " + std::string(x.layout) +
                    " tensor: only the per-channel sum over (0, 2, 3) reads a blocked layout");
      blocked = {x.dim(0), x.dim(1) / block, x.dim(2), x.dim(3), block};
      x.shape = blocked;
    }
    size_t rank = x.rank();
    // outStride[d]: how far the output slot moves when input dim d advances (0 if reduced).
    Shape outStride(rank, 0);
    int64_t stride = 1;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
        outStride[d] = stride;
        stride *= x.dim(d);
      }
    double init = kind == Kind::max ? -std::numeric_limits<double>::infinity() : 0.0;
    std::vector<double> acc(y.numel(), init);
    const T* src = x.as<T>();
    int64_t inner = rank ? x.dim(rank - 1) : 1, innerStride = rank ? outStride[rank - 1] : 0;
    std::vector<int64_t> index(rank, 0);
    for (int64_t row = 0, rows = x.numel() / std::max<int64_t>(inner, 1); row < rows; ++row) {
      int64_t slot = 0;
      for (size_t d = 0; d + 1 < rank; ++d) slot += index[d] * outStride[d];
      const T* line = src + row * inner;
      if (kind == Kind::max)
        for (int64_t j = 0; j < inner; ++j)
          acc[slot + j * innerStride] = nanMax<double>(acc[slot + j * innerStride], line[j]);
      else if (innerStride == 0) {
        double s = 0;
        for (int64_t j = 0; j < inner; ++j) s += line[j];
        acc[slot] += s;
      } else
        for (int64_t j = 0; j < inner; ++j) acc[slot + j * innerStride] += line[j];
      for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
        if (++index[d] < x.dim(d)) break;
        index[d] = 0;
      }
    }
    double scale = kind == Kind::mean ? double(y.numel()) / double(x.numel()) : 1.0;
    for (int64_t i = 0; i < y.numel(); ++i) y.as<T>()[i] = static_cast<T>(acc[i] * scale);
  });
}

}  // namespace

void reduce_sum(KernelCall& call) { reduce(call, Kind::sum); }
void reduce_mean(KernelCall& call) { reduce(call, Kind::mean); }
void reduce_max(KernelCall& call) { reduce(call, Kind::max); }

}  // namespace spmd::runtime::cpu
