// Multi-index iteration over a row-major shape, shared by the reference kernels and the CPU
// kernels that move data between layouts (broadcast, transpose, reductions).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spmd::runtime {

// Calls fn(index, linear) for every multi-index of `shape` in row-major order.
template <typename Fn>
void forEachIndex(std::span<const int64_t> shape, Fn&& fn) {
  std::vector<int64_t> index(shape.size(), 0);
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  for (int64_t linear = 0; linear < total; ++linear) {
    fn(std::span<const int64_t>(index), linear);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

}  // namespace spmd::runtime
