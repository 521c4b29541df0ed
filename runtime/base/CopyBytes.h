// memcpy for buffers that may be empty: an empty tensor's buffer may have no address (a null data
// pointer), and memcpy's pointers must not be null even for 0 bytes (UBSan's nonnull check stops
// there: EmptyTensorTest under scripts/asan.sh).
#pragma once

#include <cstddef>
#include <cstring>

namespace spmd {

inline void copyBytes(void* to, const void* from, size_t bytes) {
  if (bytes > 0) std::memcpy(to, from, bytes);
}

}  // namespace spmd
