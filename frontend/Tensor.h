// spmd::Tensor: a handle that is either concrete (a host Array) or traced (a value in the IR
// being built by spmd::jit). Op functions on traced tensors record ops; shapes are always known.
#pragma once

#include <optional>
#include <source_location>

#include "runtime/Array.h"

namespace spmd {

using Loc = std::source_location;

namespace detail {
class Trace;
}

class Tensor {
 public:
  Tensor() = default;
  Tensor(Array concrete);  // NOLINT: arrays convert to concrete tensors implicitly

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return numElements(shape_); }
  bool defined() const { return array_.has_value() || trace_ != nullptr; }
  bool isTraced() const { return trace_ != nullptr; }
  // The host data; throws if the tensor is traced (inside spmd::jit there is no data yet).
  const Array& array() const;
  // "f32[4, 1, 28, 28]"
  std::string typeString() const;

  // Internal to the frontend: the traced value (an opaque mlir::Value) and its trace.
  static Tensor traced(detail::Trace* trace, void* value, DType dtype, Shape shape);
  detail::Trace* trace() const { return trace_; }
  void* value() const { return value_; }

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::optional<Array> array_;
  detail::Trace* trace_ = nullptr;
  void* value_ = nullptr;
};

}  // namespace spmd
