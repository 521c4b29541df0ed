// Generated CUDA kernels on the simulator: the text NVRTC gets (runtime/kernels/FusedSource.h),
// compiled for the host by the C++ compiler this build used (SPMD_SIM_CXX overrides it), behind
// a prelude that declares CUDA's builtins (threadIdx, blockIdx, blockDim, gridDim as this host
// thread's variables, __global__, the bit-cast intrinsics) and followed by a launcher that sets
// them and calls the kernel once per (block, thread) of its launch in the order it is given. The
// shared object is cached by a hash of everything compiled, as the PTX cache is, under
// $SPMD_KERNEL_CACHE/host (runtime/base/KernelCache.h), and loaded into the process once.
#pragma once

#include <string>

namespace spmd::runtime::sim {

// Evaluates the kernel for (blockOrder[b], threadOrder[t]) over every b < blocks, t < threads.
using HostLaunch = void (*)(void* const* pointers, long long n, long long blocks, int threads,
                            const long long* blockOrder, const int* threadOrder);

// The launcher of `source`'s kernel `name(T* p0, ..., T* p{pointers-1}, long long n)`, compiling
// and loading it on first use. Throws spmd::Error with the compiler's output when it fails. With
// `byValue` (a struct the source defines), the first parameter is that struct, passed by value
// from the object pointers[0] points to (a fused step of several segments).
HostLaunch hostKernel(const std::string& source, const std::string& name, int pointers, const std::string& byValue = "");

}  // namespace spmd::runtime::sim
