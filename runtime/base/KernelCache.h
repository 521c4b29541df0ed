// Where compiled kernels are kept between runs: $SPMD_KERNEL_CACHE, default
// ~/.cache/spmd/kernels (NVRTC's CUBIN/PTX, runtime/cuda/Nvrtc.cpp; the simulator's host builds
// of generated kernels, runtime/sim/HostKernels.cpp, under host/).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace spmd::runtime {

inline std::filesystem::path kernelCacheDir() {
  if (const char* dir = std::getenv("SPMD_KERNEL_CACHE"); dir && *dir) return dir;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "spmd" / "kernels";
}

}  // namespace spmd::runtime
