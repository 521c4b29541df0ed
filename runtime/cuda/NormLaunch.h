// The launch geometry of the BatchNorm kernels (runtime/cuda/Norm.cu), host code, so that tests
// check it against sm_90's limits without a GPU (LaunchTest).
#pragma once

#include "runtime/kernels/Launch.h"

namespace spmd::runtime::cuda {

// Threads of a per-channel block: a power of two, since blockSum halves the block each round.
constexpr int kNormThreads = 256;

// One block per channel, reducing the channel's `elements` (N * H * W) in a double per thread.
inline kernels::Launch normChannelLaunch(const char* kernel, int64_t channels, int64_t elements) {
  return {kernel, channels, kNormThreads, kNormThreads * sizeof(double), 0, elements, true, true};
}

}  // namespace spmd::runtime::cuda
