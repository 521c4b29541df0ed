// Tensor shapes (row-major, int64 dims) and the few helpers every layer needs for them.
#pragma once

#include <cstdint>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace spmd {

using Shape = std::vector<int64_t>;

inline int64_t numElements(std::span<const int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

// Row-major strides in elements.
inline Shape rowMajorStrides(std::span<const int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

// "[4, 1, 28, 28]"
inline std::string shapeString(std::span<const int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace spmd
