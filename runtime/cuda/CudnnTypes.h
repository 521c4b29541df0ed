// cuDNN's data type for an spmd dtype, shared by the legacy convolution calls (cuda/Conv.cpp) and
// the graph API's (cuda/CudnnGraph.cpp). Internal to runtime/cuda.
#pragma once

#include <cudnn.h>

#include "runtime/base/DType.h"

namespace spmd::runtime::cuda {

// f64 -> double, bf16 -> bfloat16 (accumulated in f32 by the caller's compute type), else float.
inline cudnnDataType_t cudnnDataTypeOf(DType t) {
  if (t == DType::f64) return CUDNN_DATA_DOUBLE;
  if (t == DType::bf16) return CUDNN_DATA_BFLOAT16;
  return CUDNN_DATA_FLOAT;
}

}  // namespace spmd::runtime::cuda
