// Division of indices below 2^32 by a divisor fixed before the launch, as a multiply-high, an add
// and shifts (Granlund and Montgomery's method, "Division by invariant integers using
// multiplication", 1994, Fig. 4.1): a 64-bit division is a subroutine of about 70 instructions on a
// GPU, and two per element (the channel of an NCHW index) were most of BatchNorm's apply passes.
// The same code runs on the host (the simulator), so both give the exact quotient. Ours rather
// than libdivide's: Debian's libdivide-dev (3.0) has no __device__ functions for a kernel to call.
#pragma once

#include <cstdint>

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

struct Divider {
  uint32_t divisor = 1, magic = 0, shift = 0;  // shift = ceil(log2(divisor))
  SPMD_HOST_DEVICE uint32_t quotient(uint32_t n) const {
    if (shift == 0) return n;  // divisor 1
    const uint32_t t = uint32_t((uint64_t(n) * magic) >> 32);
    return (t + ((n - t) >> 1)) >> (shift - 1);
  }
};

// For divisor d >= 1: l = ceil(log2 d), magic = floor(2^32 (2^l - d) / d) + 1 (below 2^32).
inline Divider dividerOf(uint32_t divisor) {
  uint32_t shift = 0;
  while ((uint64_t(1) << shift) < divisor) ++shift;
  if (shift == 0) return {1, 0, 0};
  const uint64_t magic = (uint64_t(1) << 32) * ((uint64_t(1) << shift) - divisor) / divisor + 1;
  return {divisor, uint32_t(magic), shift};
}

}  // namespace spmd::runtime::kernels
