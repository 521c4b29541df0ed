// How much host memory this process may still use, and a check that fails with a clear error
// before a large allocation instead of an allocation that the kernel's OOM killer answers later.
#pragma once

#include <cstddef>
#include <string>

namespace spmd::runtime {

// The smaller of MemAvailable (/proc/meminfo) and cgroupMemoryRoom(); SIZE_MAX when neither can
// be read. SPMD_HOST_MEMORY_BYTES overrides it (for tests, or to leave room for other processes).
// `root` prefixes every path read, as cgroupMemoryRoom's does.
size_t availableHostBytes(const std::string& root = "");

// The room left under the tightest memory limit on the way from this process's own cgroup
// (/proc/self/cgroup, v2 and v1's memory controller, found through /proc/self/mountinfo) up to
// its hierarchy's root: min over those cgroups of limit - usage (v2 memory.max - memory.current,
// v1 memory.limit_in_bytes - memory.usage_in_bytes); SIZE_MAX when no limit is set. `root`
// prefixes every path read (tests run it on crafted /proc and /sys trees).
size_t cgroupMemoryRoom(const std::string& root = "");

// Throws spmd::Error when `bytes` exceeds availableHostBytes(): "`what` needs ... but only ...
// is available; `hint`".
void checkHostMemory(size_t bytes, const std::string& what, const std::string& hint);

// At least `bytes` of host memory (the size taken in `*taken`), aligned to 64 bytes, and from
// 2 MiB on to 2 MiB and advised onto transparent huge pages (MADV_HUGEPAGE: honoured where the
// system's setting is `madvise` or `always`, a no-op where it is `never`): buffers written many
// planes at a time touch another 4 KiB page with each row, and the TLB misses cost more than
// the arithmetic (the chunked Winograd's filter transforms). Null when there is no memory; free
// it with std::free.
void* allocateAligned(size_t bytes, size_t* taken);

// "249.0 MiB"
std::string formatBytes(size_t bytes);

}  // namespace spmd::runtime
