// Tensor and Tree basics (no MLIR here).
#include "frontend/Tensor.h"

#include "frontend/Tree.h"
#include "frontend/Trace.h"
#include "runtime/exec/DeviceArray.h"

namespace spmd {

Tensor::Tensor(Array concrete)
    : dtype_(concrete.dtype), shape_(concrete.shape), array_(std::move(concrete)) {}

Tensor::Tensor(std::shared_ptr<runtime::DeviceArray> resident)
    : dtype_(resident->dtype()), shape_(resident->globalShape()), resident_(std::move(resident)) {}

Tensor Tensor::traced(detail::Trace* trace, uint64_t serial, void* value, DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.trace_ = trace;
  t.traceSerial_ = serial;
  t.value_ = value;
  return t;
}

int64_t Tensor::dim(int64_t axis) const {
  int64_t r = rank();
  if (axis < -r || axis >= r)
    throw Error("axis " + std::to_string(axis) + " is out of range for a tensor of shape " +
                shapeString(shape_));
  return shape_[axis < 0 ? axis + r : axis];
}

const Array& Tensor::array() const {
  if (resident_) return resident_->host();
  if (!array_)
    throw Error("tensor " + typeString() +
                " is traced inside spmd::jit and has no data yet; return it from the traced "
                "function to get its value");
  return *array_;
}

std::string Tensor::typeString() const { return std::string(dtypeName(dtype_)) + shapeString(shape_); }

const Tensor& Tree::at(const std::string& name, Loc loc) const {
  auto it = items_.find(name);
  if (it == items_.end()) {
    std::string known;
    for (auto& [key, _] : items_) {
      if (known.size() > 200) { known += ", ..."; break; }
      known += (known.empty() ? "" : ", ") + key;
    }
    throw Error(detail::where(loc) + ": tree has no entry '" + name + "' (" +
                (items_.empty() ? std::string("it is empty") : "it has " + std::to_string(items_.size()) + " entries: " + known) +
                ")");
  }
  return it->second;
}

int64_t Tree::numElements() const {
  int64_t total = 0;
  for (auto& [_, t] : items_) total += t.numel();
  return total;
}

}  // namespace spmd
