// NVRTC: CUDA C source to PTX or CUBIN at run time. Used for the generated fused kernels; needs
// only the NVRTC library, not a GPU, so tests compile generated kernels on any machine.
#pragma once

#include <string>

namespace spmd::runtime::cuda {

// Compiles `source` for `arch` ("sm_90": CUBIN; "compute_90": PTX). Results are cached in memory
// and under $SPMD_KERNEL_CACHE (default ~/.cache/spmd/kernels) by a hash of source, arch and the
// NVRTC version. Throws spmd::Error with NVRTC's log, the failing source line shown.
std::string compileCuda(const std::string& source, const std::string& arch);

// "12.9" style version of the NVRTC library in use.
std::string nvrtcVersionString();

}  // namespace spmd::runtime::cuda
