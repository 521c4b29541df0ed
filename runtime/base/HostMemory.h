// How much host memory this process may still use, and a check that fails with a clear error
// before a large allocation instead of an allocation that the kernel's OOM killer answers later.
#pragma once

#include <cstddef>
#include <string>

namespace spmd::runtime {

// The smaller of MemAvailable (/proc/meminfo) and the room left under this process's cgroup
// memory limit (v2 memory.max or v1 limit_in_bytes); SIZE_MAX when neither can be read.
// SPMD_HOST_MEMORY_BYTES overrides it (for tests, or to leave room for other processes).
size_t availableHostBytes();

// Throws spmd::Error when `bytes` exceeds availableHostBytes(): "`what` needs ... but only ...
// is available; `hint`".
void checkHostMemory(size_t bytes, const std::string& what, const std::string& hint);

// "249.0 MiB"
std::string formatBytes(size_t bytes);

}  // namespace spmd::runtime
