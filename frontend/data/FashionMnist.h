// Fashion-MNIST from its IDX files (gzip), as Debian's dataset-fashion-mnist installs them.
#pragma once

#include <string>

#include "frontend/data/Dataset.h"

namespace spmd::data {

// Where Debian's package puts the files; $SPMD_FASHION_MNIST_DIR overrides it.
std::string defaultFashionMnistDir();

// split: "train" (60,000 images) or "test" (10,000); limit > 0 reads only the first `limit`.
// The Dataset's columns: images f32 [N, 1, 28, 28] (pixel / 255) and labels i32 [N] (0..9).
// Throws spmd::Error naming the file and the problem (missing, truncated, wrong magic).
Dataset loadFashionMnist(const std::string& split, int64_t limit = 0,
                         const std::string& dir = defaultFashionMnistDir());

}  // namespace spmd::data
