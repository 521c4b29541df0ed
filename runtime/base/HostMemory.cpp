// availableHostBytes from /proc/meminfo and the cgroup limit files.
#include "runtime/base/HostMemory.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

namespace spmd::runtime {
namespace {

constexpr size_t kUnknown = std::numeric_limits<size_t>::max();

// The first number in `path`, or kUnknown ("max", missing file, garbage).
size_t numberIn(const char* path) {
  std::ifstream in(path);
  unsigned long long value = 0;
  if (!(in >> value)) return kUnknown;
  return static_cast<size_t>(value);
}

size_t memAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  unsigned long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return static_cast<size_t>(kib) * 1024;
  return kUnknown;
}

size_t cgroupRoom(const char* limitPath, const char* usagePath) {
  size_t limit = numberIn(limitPath), usage = numberIn(usagePath);
  // cgroup v1 reports "no limit" as a huge page-rounded number.
  if (limit == kUnknown || usage == kUnknown || limit >= (size_t(1) << 60)) return kUnknown;
  return limit > usage ? limit - usage : 0;
}

}  // namespace

size_t availableHostBytes() {
  if (std::optional<int64_t> bytes = envWhole("SPMD_HOST_MEMORY_BYTES", 0, INT64_MAX)) return size_t(*bytes);
  size_t room = memAvailable();
  for (auto [limit, usage] : {std::pair{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"},
                              std::pair{"/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                        "/sys/fs/cgroup/memory/memory.usage_in_bytes"}})
    room = std::min(room, cgroupRoom(limit, usage));
  return room;
}

std::string formatBytes(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return text;
}

void checkHostMemory(size_t bytes, const std::string& what, const std::string& hint) {
  size_t room = availableHostBytes();
  if (bytes <= room) return;
  throw Error(what + " needs " + formatBytes(bytes) + " of host memory but only " +
              formatBytes(room) + " is available; " + hint);
}

}  // namespace spmd::runtime
