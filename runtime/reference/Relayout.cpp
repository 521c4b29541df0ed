// Reference relayout: every element of an NCHW tensor copied from its offset in the input's
// layout to its offset in the result's (runtime/program/Layouts.h), the oracle for the CPU
// backend's oneDNN reorder.
#include <cstring>

#include "runtime/program/Layouts.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::reference {

void relayout(KernelCall& call) {
  const TensorView &x = call.in[0], &y = call.out[0];
  const size_t bytes = dtypeSize(x.dtype);
  if (x.layout == y.layout) {
    std::memcpy(y.data, x.data, static_cast<size_t>(x.numel()) * bytes);
    return;
  }
  for (const TensorView* t : {&x, &y})
    if (std::string problem = layoutProblem(t->layout, t->shape); !problem.empty())
      throw Error("relayout: " + problem + ", got " + shapeString(x.shape));
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t from = innerBlock(x.layout, C), to = innerBlock(y.layout, C);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          std::memcpy(static_cast<std::byte*>(y.data) + blockedOffset(to, C, H, W, n, c, h, w) * bytes,
                      static_cast<const std::byte*>(x.data) + blockedOffset(from, C, H, W, n, c, h, w) * bytes,
                      bytes);
}

}  // namespace spmd::runtime::reference
