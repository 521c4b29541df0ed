// A host-side n-d array: dtype, shape and shared row-major storage. What users pass to and get
// back from compiled functions, and what parameter trees hold.
#pragma once

#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <span>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/base/Shape.h"

namespace spmd {

// The bytes Arrays share: their own, or memory another library lends (a DLPack tensor,
// frontend/io/DLPack.h), given back through `release` when the last Array using it is gone.
class ArrayStorage {
 public:
  explicit ArrayStorage(size_t bytes) : owned_(bytes) {}
  ArrayStorage(std::byte* borrowed, size_t bytes, std::function<void()> release)
      : borrowed_(borrowed), borrowedBytes_(bytes), release_(std::move(release)) {}
  ~ArrayStorage() {
    if (release_) release_();
  }
  ArrayStorage(const ArrayStorage&) = delete;
  ArrayStorage& operator=(const ArrayStorage&) = delete;
  std::byte* data() { return borrowed_ ? borrowed_ : owned_.data(); }
  size_t size() const { return borrowed_ ? borrowedBytes_ : owned_.size(); }

 private:
  std::vector<std::byte> owned_;
  std::byte* borrowed_ = nullptr;
  size_t borrowedBytes_ = 0;
  std::function<void()> release_;
};

struct Array {
  DType dtype = DType::f32;
  Shape shape;
  std::shared_ptr<ArrayStorage> storage;
  size_t offset = 0;  // bytes into storage where this array starts (views share storage)

  // The bytes an array of `shape` holds; throws naming the shape where an extent is negative or
  // the count does not fit in memory's addresses (a product that would wrap to a small number).
  static size_t bytesOf(DType dtype, const Shape& shape) {
    size_t bytes = dtypeSize(dtype);
    for (int64_t d : shape) {
      if (d < 0)
        throw Error("an array " + std::string(dtypeName(dtype)) + shapeString(shape) + " has the negative extent " +
                    std::to_string(d) + "; extents count from 0");
      if (__builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes))
        throw Error("an array " + std::string(dtypeName(dtype)) + shapeString(shape) +
                    " would hold more bytes than memory can address; check its shape");
    }
    return bytes;
  }

  static Array zeros(DType dtype, Shape shape) {
    const size_t bytes = bytesOf(dtype, shape);
    std::shared_ptr<ArrayStorage> storage;
    try {
      storage = std::make_shared<ArrayStorage>(bytes);
    } catch (const std::bad_alloc&) {
      throw Error("cannot allocate an array " + std::string(dtypeName(dtype)) + shapeString(shape) +
                  " (" + std::to_string(bytes) + " bytes): out of host memory");
    }
    return {dtype, std::move(shape), std::move(storage)};
  }
  template <typename T>
  static Array of(Shape shape, std::span<const T> values) {
    Array a = zeros(dtypeOf<T>(), std::move(shape));
    if (static_cast<int64_t>(values.size()) != a.numel())
      throw Error("Array::of: " + std::to_string(values.size()) + " values for shape " +
                  shapeString(a.shape));
    std::memcpy(a.data(), values.data(), values.size_bytes());
    return a;
  }

  // A rank-0 array holding `value` in `dtype` (rounded to nearest; to i32 toward zero).
  static Array scalar(DType dtype, double value) {
    Array a = zeros(dtype, {});
    switch (dtype) {
      case DType::f32: a.values<float>()[0] = static_cast<float>(value); break;
      case DType::f64: a.values<double>()[0] = value; break;
      case DType::bf16: a.values<bf16>()[0] = toBf16(static_cast<float>(value)); break;
      case DType::i32: a.values<int32_t>()[0] = static_cast<int32_t>(value); break;
    }
    return a;
  }

  // A view of `shape` starting `byteOffset` bytes into `base`, sharing its storage (no copy).
  static Array view(const Array& base, size_t byteOffset, Shape shape) {
    Array v{base.dtype, std::move(shape), base.storage, base.offset + byteOffset};
    if (!base.storage || v.offset + v.bytes() > base.storage->size())
      throw Error("Array::view: " + shapeString(v.shape) + " at byte " +
                  std::to_string(byteOffset) + " does not fit in " + shapeString(base.shape));
    return v;
  }

  int64_t numel() const { return numElements(shape); }
  size_t bytes() const {
    return storage ? static_cast<size_t>(numel()) * dtypeSize(dtype) : 0;
  }
  std::byte* data() const { return storage ? storage->data() + offset : nullptr; }
  template <typename T>
  std::span<T> values() const {
    if (dtypeOf<T>() != dtype)
      throw Error("Array::values: array is " + std::string(dtypeName(dtype)) + ", asked for " +
                  std::string(dtypeName(dtypeOf<T>())));
    return {reinterpret_cast<T*>(data()), static_cast<size_t>(numel())};
  }
};

}  // namespace spmd
