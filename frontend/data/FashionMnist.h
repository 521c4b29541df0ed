// Fashion-MNIST from its IDX files (gzip), as Debian's dataset-fashion-mnist installs them.
#pragma once

#include <string>

#include "runtime/base/Array.h"

namespace spmd::data {

struct Dataset {
  Array images;  // f32 [N, 1, 28, 28], pixel / 255
  Array labels;  // i32 [N], classes 0..9
  int64_t size() const { return labels.shape.empty() ? 0 : labels.shape[0]; }
};

// Where Debian's package puts the files; $SPMD_FASHION_MNIST_DIR overrides it.
std::string defaultFashionMnistDir();

// split: "train" (60,000 images) or "test" (10,000); limit > 0 reads only the first `limit`.
// Throws spmd::Error naming the file and the problem (missing, truncated, wrong magic).
Dataset loadFashionMnist(const std::string& split, int64_t limit = 0,
                         const std::string& dir = defaultFashionMnistDir());

// Rows [start, start + count) of a dataset, copied.
Dataset slice(const Dataset& data, int64_t start, int64_t count);

}  // namespace spmd::data
