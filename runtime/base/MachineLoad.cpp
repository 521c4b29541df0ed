// MachineLoad: /proc/stat's first line and /proc/self/stat's utime and stime.
#include "runtime/base/MachineLoad.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace spmd::runtime {
namespace {

std::mutex sourceMutex;
std::function<CpuTicks()>& source() {
  static std::function<CpuTicks()> s;
  return s;
}

CpuTicks fromProc() {
  CpuTicks t;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  if (!(stat >> cpu) || cpu != "cpu") return t;
  // user nice system idle iowait irq softirq steal (guest time is inside user)
  double fields[8] = {};
  for (double& f : fields)
    if (!(stat >> f)) return t;
  const double idle = fields[3] + fields[4];
  for (double f : fields) t.total += f;
  t.busy = t.total - idle;
  std::ifstream self("/proc/self/stat");
  std::string line;
  if (!std::getline(self, line)) return t;
  // The command name (field 2) may hold spaces: fields are counted after its closing ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return t;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  t.self = utime + stime;
  t.known = true;
  return t;
}

}  // namespace

CpuTicks cpuTicksNow() {
  {
    std::lock_guard lock(sourceMutex);
    if (source()) return source()();
  }
  return fromProc();
}

void setCpuTicksSource(std::function<CpuTicks()> s) {
  std::lock_guard lock(sourceMutex);
  source() = std::move(s);
}

int onlineCores() { return int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

MachineLoad loadBetween(const CpuTicks& before, const CpuTicks& after, int cores, double leastTicks) {
  MachineLoad load;
  load.cores = cores;
  if (!before.known || !after.known || cores < 1) return load;
  const double wall = (after.total - before.total) / cores;
  if (wall < leastTicks) return load;
  load.self = (after.self - before.self) / wall;
  load.others = std::max(0.0, (after.busy - before.busy) - (after.self - before.self)) / wall;
  load.known = true;
  return load;
}

}  // namespace spmd::runtime
