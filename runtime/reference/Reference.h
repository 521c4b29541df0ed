// Reference kernels: the plainest correct loops (double accumulation), one per op, same
// signature as every backend kernel. Tests use them as the oracle; CPU kernels without an f64
// library path call them for f64.
#pragma once

#include <cstring>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::reference {

// Element `from` of `src` into element `to` of `dst` (one element of any dtype; the data-movement
// kernels' step).
inline void copyElement(const TensorView& dst, int64_t to, const TensorView& src, int64_t from) {
  const size_t size = dtypeSize(src.dtype);
  std::memcpy(static_cast<std::byte*>(dst.data) + to * size, static_cast<const std::byte*>(src.data) + from * size,
              size);
}

#define SPMD_DECLARE_KERNEL(name, ...) void name(KernelCall& call);
SPMD_PROGRAM_OPS(SPMD_DECLARE_KERNEL)
#undef SPMD_DECLARE_KERNEL

}  // namespace spmd::runtime::reference
