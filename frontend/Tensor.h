// spmd::Tensor: a handle that is concrete (a host Array), on devices (a result of jit/pmap left
// where it was computed, runtime::DeviceArray) or traced (a value in the IR being built by
// spmd::jit). Op functions on traced tensors record ops; shapes are always known.
#pragma once

#include <memory>
#include <optional>
#include <source_location>

#include "runtime/base/Array.h"

namespace spmd {

using Loc = std::source_location;

namespace detail {
class Trace;
}
namespace runtime {
class DeviceArray;
}

class Tensor {
 public:
  Tensor() = default;
  Tensor(Array concrete);  // NOLINT: arrays convert to concrete tensors implicitly
  // A value that stays on its devices until read (what jit and pmap return).
  explicit Tensor(std::shared_ptr<runtime::DeviceArray> resident);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t axis) const;  // negative axes count from the end
  int64_t numel() const { return numElements(shape_); }
  bool defined() const { return array_.has_value() || resident_ || trace_ != nullptr; }
  bool isTraced() const { return trace_ != nullptr; }
  // The host data; throws if the tensor is traced (inside spmd::jit there is no data yet). A
  // value on devices is copied to the host on the first call (and kept).
  const Array& array() const;
  // The device-resident value, or null for a host or traced tensor.
  const std::shared_ptr<runtime::DeviceArray>& resident() const { return resident_; }
  bool onDevices() const { return resident_ != nullptr; }
  // "f32[4, 1, 28, 28]"
  std::string typeString() const;

  // Internal to the frontend: the traced value (an opaque mlir::Value), its trace and that
  // trace's serial number (a later trace may be made at a finished one's address).
  static Tensor traced(detail::Trace* trace, uint64_t serial, void* value, DType dtype, Shape shape);
  detail::Trace* trace() const { return trace_; }
  uint64_t traceSerial() const { return traceSerial_; }
  void* value() const { return value_; }

 private:
  DType dtype_ = DType::f32;
  Shape shape_;
  std::optional<Array> array_;
  std::shared_ptr<runtime::DeviceArray> resident_;
  detail::Trace* trace_ = nullptr;
  uint64_t traceSerial_ = 0;
  void* value_ = nullptr;
};

}  // namespace spmd
