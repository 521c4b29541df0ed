// crc32Of with zlib, in pieces of at most 1 GiB (zlib counts in uInt).
#include "runtime/base/Checksum.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>

namespace spmd::runtime {

uint32_t crc32Of(std::span<const std::span<const std::byte>> parts) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::span<const std::byte> part : parts)
    for (size_t done = 0; done < part.size();) {
      uInt n = uInt(std::min<size_t>(part.size() - done, size_t(1) << 30));
      crc = crc32(crc, reinterpret_cast<const Bytef*>(part.data() + done), n);
      done += n;
    }
  return uint32_t(crc);
}

std::string crc32Text(std::span<const std::byte> bytes) {
  char text[16];
  std::snprintf(text, sizeof text, "%08lx", static_cast<unsigned long>(crc32Of(bytes)));
  return text;
}

}  // namespace spmd::runtime
