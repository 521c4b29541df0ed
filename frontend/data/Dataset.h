// A data set of any examples: one or more arrays ("columns") whose leading dimension indexes
// the examples, of any dtype and shape (images [N, C, H, W] f32 and labels [N] i32; token ids
// [N, T] i32; ...). The loader (data/Loader.h) batches and shards any Dataset; Fashion-MNIST
// (data/FashionMnist.h) is one instance, with images in column 0 and labels in column 1.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/base/Array.h"

namespace spmd::data {

struct Dataset {
  std::vector<Array> columns;

  Dataset() = default;
  // Checks that every column has a leading dimension and that they agree; throws spmd::Error
  // naming the column that differs.
  explicit Dataset(std::vector<Array> columns);
  Dataset(Array images, Array labels) : Dataset(std::vector<Array>{std::move(images), std::move(labels)}) {}

  int64_t size() const { return columns.empty() ? 0 : columns[0].shape[0]; }
  // Image-classification sets (column 0 images, column 1 labels).
  const Array& images() const { return columns.at(0); }
  const Array& labels() const { return columns.at(1); }
  Array& images() { return columns.at(0); }
  Array& labels() { return columns.at(1); }
};

// Rows [start, start + count) of every column, copied.
Dataset slice(const Dataset& data, int64_t start, int64_t count);

// Rows `rows[0], rows[1], ...` of every column, in that order, copied into new arrays.
Dataset gather(const Dataset& data, const std::vector<int64_t>& rows);

}  // namespace spmd::data
