// CRC-32 (zlib's) of bytes given in any number of pieces, and its text form (8 hex digits), as
// Program files, checkpoints and the processes' agreement check use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace spmd::runtime {

uint32_t crc32Of(std::span<const std::span<const std::byte>> parts);
inline uint32_t crc32Of(std::span<const std::byte> bytes) { return crc32Of(std::span(&bytes, 1)); }
// "0a1b2c3d"
std::string crc32Text(std::span<const std::byte> bytes);

}  // namespace spmd::runtime
