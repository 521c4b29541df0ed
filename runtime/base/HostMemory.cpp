// availableHostBytes from /proc/meminfo and the limits of this process's own cgroups.
#include "runtime/base/HostMemory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

namespace spmd::runtime {
namespace {

constexpr size_t kUnknown = std::numeric_limits<size_t>::max();

// The first number in `path`, or kUnknown ("max", missing file, garbage).
size_t numberIn(const std::string& path) {
  std::ifstream in(path);
  unsigned long long value = 0;
  if (!(in >> value)) return kUnknown;
  return static_cast<size_t>(value);
}

size_t memAvailable(const std::string& root) {
  std::ifstream in(root + "/proc/meminfo");
  std::string key;
  unsigned long long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return static_cast<size_t>(kib) * 1024;
  return kUnknown;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

// A cgroup hierarchy this process belongs to: where it is mounted and the process's place in it.
struct Hierarchy {
  bool v2 = false;
  std::string path;                 // from /proc/self/cgroup
  std::string mountRoot, mountPoint;  // from /proc/self/mountinfo
};

// Limit minus usage of the cgroup directory `dir`; kUnknown without a limit.
size_t roomIn(const std::string& dir, bool v2) {
  size_t limit = numberIn(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
  size_t usage = numberIn(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
  // v2 says "max" (no number) for no limit; v1 a huge page-rounded number.
  if (limit == kUnknown || limit >= (size_t(1) << 60)) return kUnknown;
  if (usage == kUnknown) usage = 0;
  return limit > usage ? limit - usage : 0;
}

}  // namespace

size_t cgroupMemoryRoom(const std::string& root) {
  std::vector<Hierarchy> hierarchies;
  {
    std::ifstream in(root + "/proc/self/cgroup");
    for (std::string line; std::getline(in, line);) {
      // "hierarchy-ID:controllers:path"; v2 is "0::path", v1's memory controller "N:memory:path".
      size_t first = line.find(':'), second = line.find(':', first + 1);
      if (first == std::string::npos || second == std::string::npos) continue;
      std::string id = line.substr(0, first), controllers = line.substr(first + 1, second - first - 1);
      Hierarchy h;
      h.path = line.substr(second + 1);
      auto list = split(controllers, ',');
      if (id == "0" && controllers.empty()) h.v2 = true;
      else if (std::find(list.begin(), list.end(), "memory") == list.end()) continue;
      hierarchies.push_back(h);
    }
  }
  {
    std::ifstream in(root + "/proc/self/mountinfo");
    for (std::string line; std::getline(in, line);) {
      // "ID parent major:minor root mountpoint options [optional...] - fstype source superoptions"
      auto fields = split(line, ' ');
      auto dash = std::find(fields.begin(), fields.end(), "-");
      if (fields.size() < 5 || dash == fields.end() || dash + 3 > fields.end()) continue;
      const std::string& type = dash[1];
      bool v2 = type == "cgroup2", v1Memory = false;
      if (type == "cgroup")
        for (const std::string& option : split(dash[3], ',')) v1Memory |= option == "memory";
      for (Hierarchy& h : hierarchies)
        if (h.mountPoint.empty() && ((h.v2 && v2) || (!h.v2 && v1Memory)))
          h.mountRoot = fields[3], h.mountPoint = fields[4];
    }
  }
  size_t room = kUnknown;
  for (const Hierarchy& h : hierarchies) {
    if (h.mountPoint.empty()) continue;
    // The process's cgroup relative to what the mount shows (a container's mount may show a
    // subtree; its own cgroup namespace shows "/").
    std::string relative = h.path;
    if (h.mountRoot != "/" && relative.rfind(h.mountRoot, 0) == 0) relative = relative.substr(h.mountRoot.size());
    std::string top = root + h.mountPoint;
    std::string dir = top + (relative == "/" ? "" : relative);
    // Walk up to the mount point: the tightest limit on the way binds.
    for (;;) {
      room = std::min(room, roomIn(dir, h.v2));
      if (dir.size() <= top.size()) break;
      size_t slash = dir.rfind('/');
      if (slash == std::string::npos || slash < top.size()) break;
      dir = dir.substr(0, slash);
    }
  }
  return room;
}


size_t availableHostBytes(const std::string& root) {
  if (std::optional<int64_t> bytes = envWhole("SPMD_HOST_MEMORY_BYTES", 0, INT64_MAX)) return size_t(*bytes);
  return std::min(memAvailable(root), cgroupMemoryRoom(root));
}

std::string formatBytes(size_t bytes) {
  // MiB from 1 MiB up (the plan's sizes); below, KiB or bytes, so that a small need is not "0.0 MiB".
  char text[32];
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
  else if (bytes < 1024 * 1024)
    std::snprintf(text, sizeof text, "%.1f KiB", double(bytes) / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
  return text;
}

void checkHostMemory(size_t bytes, const std::string& what, const std::string& hint) {
  size_t room = availableHostBytes();
  if (bytes <= room) return;
  throw Error(what + " needs " + formatBytes(bytes) + " of host memory but only " +
              formatBytes(room) + " is available; " + hint);
}

void* allocateAligned(size_t bytes, size_t* taken) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const bool huge = bytes >= kHugePage;
  const size_t alignment = huge ? kHugePage : 64;
  const size_t rounded = std::max<size_t>(alignment, (bytes + alignment - 1) / alignment * alignment);
  void* p = std::aligned_alloc(alignment, rounded);
  if (p && huge) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it, 4 KiB pages
  if (taken) *taken = p ? rounded : 0;
  return p;
}

}  // namespace spmd::runtime
