// The memory check reads this process's own cgroups (runtime/base/HostMemory.h): on crafted
// /proc and /sys trees (cgroup v2 and v1, nested limits where a parent's binds, a container's
// own namespace, a mount that shows a subtree, no limit at all), and, where this process may
// create a cgroup (root on a writable cgroup v1 memory hierarchy), inside a real one with a limit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/base/HostMemory.h"

namespace spmd::runtime {
namespace {

namespace fs = std::filesystem;
constexpr size_t GiB = size_t(1) << 30;

class CraftedTree {
 public:
  CraftedTree() : root_(fs::temp_directory_path() / ("spmd_cgroup_" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
  }
  ~CraftedTree() { fs::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    fs::create_directories((root_ / path.substr(1)).parent_path());
    std::ofstream(root_ / path.substr(1)) << text;
  }
  size_t room() const { return cgroupMemoryRoom(root_.string()); }
  size_t available() const { return availableHostBytes(root_.string()); }

 private:
  fs::path root_;
};

TEST(CgroupMemoryTest, V2TheTightestLimitOnTheWayUpBinds) {
  CraftedTree t;
  t.write("/proc/self/cgroup", "0::/user.slice/job.scope\n");
  t.write("/proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n");
  t.write("/sys/fs/cgroup/memory.max", "max\n");  // the root has no limit file in practice
  t.write("/sys/fs/cgroup/user.slice/memory.max", std::to_string(8 * GiB) + "\n");
  t.write("/sys/fs/cgroup/user.slice/memory.current", std::to_string(5 * GiB) + "\n");
  t.write("/sys/fs/cgroup/user.slice/job.scope/memory.max", std::to_string(4 * GiB) + "\n");
  t.write("/sys/fs/cgroup/user.slice/job.scope/memory.current", std::to_string(GiB / 2) + "\n");
  EXPECT_EQ(t.room(), 3 * GiB) << "the parent's 8 GiB with 5 GiB used leaves 3 GiB, less than the job's 3.5";
  t.write("/sys/fs/cgroup/user.slice/memory.current", std::to_string(7 * GiB) + "\n");
  EXPECT_EQ(t.room(), GiB);
  t.write("/sys/fs/cgroup/user.slice/memory.max", "max\n");
  EXPECT_EQ(t.room(), 4 * GiB - GiB / 2);
}

// What the host-memory check uses (availableHostBytes) is the smaller of MemAvailable and the
// cgroup's room: a 3 GiB cgroup on a host with 100 GiB free has 3 GiB, and the other way round.
TEST(CgroupMemoryTest, TheHostMemoryCheckTakesTheCgroupsRoomWhereItIsSmaller) {
  if (std::getenv("SPMD_HOST_MEMORY_BYTES")) GTEST_SKIP() << "SPMD_HOST_MEMORY_BYTES overrides the check";
  CraftedTree t;
  t.write("/proc/self/cgroup", "0::/job.scope\n");
  t.write("/proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw\n");
  t.write("/sys/fs/cgroup/job.scope/memory.max", std::to_string(4 * GiB) + "\n");
  t.write("/sys/fs/cgroup/job.scope/memory.current", std::to_string(GiB) + "\n");
  t.write("/proc/meminfo", "MemTotal: 134217728 kB\nMemFree: 104857600 kB\nMemAvailable: 104857600 kB\n");
  EXPECT_EQ(t.available(), 3 * GiB) << "the cgroup's 4 GiB with 1 GiB used, not the host's 100 GiB";
  t.write("/proc/meminfo", "MemTotal: 134217728 kB\nMemFree: 1048576 kB\nMemAvailable: 2097152 kB\n");
  EXPECT_EQ(t.available(), 2 * GiB) << "the host's 2 GiB available, under the cgroup's 3";
}

TEST(CgroupMemoryTest, V1MemoryControllerInItsOwnHierarchy) {
  CraftedTree t;
  t.write("/proc/self/cgroup", "9:pids:/\n4:cpu,memory:/process_api/abc\n1:cpu:/\n0::/\n");
  t.write("/proc/self/mountinfo",
          "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
          "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,cpu,memory\n"
          "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n");
  t.write("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  t.write("/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes", std::to_string(4 * GiB) + "\n");
  t.write("/sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes", std::to_string(GiB / 2) + "\n");
  EXPECT_EQ(t.room(), 4 * GiB - GiB / 2);
}

TEST(CgroupMemoryTest, ContainersAndSubtreeMountsAndNoLimit) {
  {  // A container with its own cgroup namespace: it is "/" and its limit is at the mount point.
    CraftedTree t;
    t.write("/proc/self/cgroup", "0::/\n");
    t.write("/proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    t.write("/sys/fs/cgroup/memory.max", std::to_string(4 * GiB) + "\n");
    t.write("/sys/fs/cgroup/memory.current", std::to_string(GiB) + "\n");
    EXPECT_EQ(t.room(), 3 * GiB);
  }
  {  // A mount that shows the subtree /docker/x: the process's /docker/x/sub is sub under it.
    CraftedTree t;
    t.write("/proc/self/cgroup", "0::/docker/x/sub\n");
    t.write("/proc/self/mountinfo", "30 23 0:26 /docker/x /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    t.write("/sys/fs/cgroup/sub/memory.max", std::to_string(2 * GiB) + "\n");
    t.write("/sys/fs/cgroup/sub/memory.current", "0\n");
    EXPECT_EQ(t.room(), 2 * GiB);
  }
  {  // No limit anywhere, or no cgroup files at all.
    CraftedTree t;
    t.write("/proc/self/cgroup", "0::/a\n");
    t.write("/proc/self/mountinfo", "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    t.write("/sys/fs/cgroup/a/memory.max", "max\n");
    EXPECT_EQ(t.room(), SIZE_MAX);
    CraftedTree empty;
    EXPECT_EQ(empty.room(), SIZE_MAX);
  }
}

// This process's memory cgroup directory on a v1 hierarchy, or empty.
fs::path ownV1MemoryCgroup() {
  std::string path, mount;
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string controllers = "," + line.substr(a + 1, b - a - 1) + ",";
    if (controllers.find(",memory,") != std::string::npos) path = line.substr(b + 1);
  }
  std::ifstream mounts("/proc/self/mountinfo");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point, word;
    fields >> id >> parent >> device >> root >> point;
    while (fields >> word && word != "-") {}
    std::string type, source, options;
    fields >> type >> source >> options;
    if (type == "cgroup" && ("," + options + ",").find(",memory,") != std::string::npos && root == "/") mount = point;
  }
  if (path.empty() || mount.empty()) return {};
  return fs::path(mount) / path.substr(1);
}

// Inside a real cgroup: a child of this process's own memory cgroup with a 3 GiB limit, this
// process moved into it and back. Needs root and a writable cgroup v1 memory hierarchy; where
// that is not so, says why (the crafted trees above still hold the logic).
TEST(CgroupMemoryTest, InsideARealCgroupItsLimitBinds) {
  fs::path own = ownV1MemoryCgroup();
  if (own.empty() || ::geteuid() != 0) {
    GTEST_SKIP() << "no real cgroup here (" << (own.empty() ? "no cgroup v1 memory hierarchy" : "not root")
                 << "): the crafted trees carry this check";
  }
  fs::path child = own / ("spmd_test_" + std::to_string(::getpid()));
  std::error_code error;
  if (!fs::create_directory(child, error)) {
    GTEST_SKIP() << "cannot create " << child << " (" << error.message() << "): the crafted trees carry this check";
  }
  std::ofstream(child / "memory.limit_in_bytes") << 3 * GiB;
  std::ofstream(child / "cgroup.procs") << ::getpid();
  size_t inside = cgroupMemoryRoom();
  std::ofstream(own / "cgroup.procs") << ::getpid();
  size_t outside = cgroupMemoryRoom();
  fs::remove(child, error);
  EXPECT_LE(inside, 3 * GiB) << "inside " << child;
  EXPECT_GT(inside, GiB) << "this test process uses far less than 2 GiB";
  EXPECT_GT(outside, inside) << "back in " << own;
  std::printf("  in a real cgroup limited to 3 GiB: %.2f GiB of room; outside it: %.2f GiB\n", double(inside) / GiB,
              double(std::min(outside, 1000 * GiB)) / GiB);
}

}  // namespace
}  // namespace spmd::runtime
