// Launch geometry and the limits of the GPUs the CUDA backend is built for (sm_90, the H100),
// checked before every kernel launch: by the CUDA backend before it launches, and by the
// simulator, which computes the same geometry for the same kernels, so a launch a GPU would
// refuse (or a block size a kernel's tree reduction cannot use) fails in CI, naming the kernel
// and the step. Host code only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace spmd::runtime::kernels {

struct LaunchLimits {
  int maxThreadsPerBlock = 1024;
  int64_t maxBlocks = 2147483647;          // gridDim.x
  size_t maxStaticShared = 48 * 1024;      // __shared__ arrays per block
  size_t maxDynamicShared = 227 * 1024;    // per block, after opting in (sm_90)
};
inline constexpr LaunchLimits kSm90{};

struct Launch {
  const char* kernel;
  int64_t blocks;
  int threads;
  size_t staticShared = 0, dynamicShared = 0;
  int64_t elements = 0;           // the index space the kernel walks
  bool index64 = true;            // its indices are 64-bit (else elements must stay below 2^31)
  bool powerOfTwoBlock = false;   // a block-wide tree reduction halves the block each round
};

// Throws spmd::Error naming the kernel, `where` (the step) and the limit a launch breaks.
void checkLaunch(const Launch& launch, const std::string& where, const LaunchLimits& limits = kSm90);

// The grid of a grid-stride loop over `n` elements, `threads` per block: one element per thread
// up to 8 * 65535 blocks, each thread striding over the rest.
inline Launch gridStride(const char* kernel, int64_t n, int threads = 256) {
  int64_t blocks = (n + threads - 1) / threads;
  blocks = blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks);
  return {kernel, blocks, threads, 0, 0, n, true, false};
}

}  // namespace spmd::runtime::kernels
