// Dataset: columns with a shared leading dimension; slice and gather copy rows of every column.
#include "frontend/data/Dataset.h"

#include <cstring>
#include <string>

#include "runtime/base/Error.h"

namespace spmd::data {
namespace {

size_t rowBytes(const Array& column) {
  int64_t n = column.shape[0];
  return n == 0 ? 0 : column.bytes() / static_cast<size_t>(n);
}

Shape withRows(const Array& column, int64_t rows) {
  Shape shape = column.shape;
  shape[0] = rows;
  return shape;
}

}  // namespace

Dataset::Dataset(std::vector<Array> cols) : columns(std::move(cols)) {
  for (size_t c = 0; c < columns.size(); ++c) {
    if (columns[c].shape.empty())
      throw Error("data::Dataset: column " + std::to_string(c) + " is a scalar; every column needs a leading "
                  "dimension indexing the examples");
    if (columns[c].shape[0] != columns[0].shape[0])
      throw Error("data::Dataset: column " + std::to_string(c) + " has " + std::to_string(columns[c].shape[0]) +
                  " examples but column 0 has " + std::to_string(columns[0].shape[0]));
  }
}

Dataset slice(const Dataset& data, int64_t start, int64_t count) {
  if (start < 0 || count < 0 || start + count > data.size())
    throw Error("data::slice: rows [" + std::to_string(start) + ", " + std::to_string(start + count) +
                ") are outside a dataset of " + std::to_string(data.size()));
  std::vector<Array> columns;
  for (const Array& column : data.columns) {
    Array out = Array::zeros(column.dtype, withRows(column, count));
    std::memcpy(out.data(), column.data() + start * rowBytes(column), out.bytes());
    columns.push_back(std::move(out));
  }
  return Dataset(std::move(columns));
}

Dataset gather(const Dataset& data, const std::vector<int64_t>& rows) {
  std::vector<Array> columns;
  for (const Array& column : data.columns) {
    const size_t bytes = rowBytes(column);
    Array out = Array::zeros(column.dtype, withRows(column, static_cast<int64_t>(rows.size())));
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r] < 0 || rows[r] >= data.size())
        throw Error("data::gather: row " + std::to_string(rows[r]) + " is outside a dataset of " +
                    std::to_string(data.size()));
      std::memcpy(out.data() + r * bytes, column.data() + rows[r] * bytes, bytes);
    }
    columns.push_back(std::move(out));
  }
  return Dataset(std::move(columns));
}

}  // namespace spmd::data
