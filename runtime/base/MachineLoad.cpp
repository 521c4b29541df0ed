// MachineLoad: /proc/stat's first line and /proc/self/stat's utime and stime; a thread's run
// delay from /proc/thread-self/schedstat.
#include "runtime/base/MachineLoad.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace spmd::runtime {
namespace {

// A reading of /proc that tests replace (setCpuTicksSource, setRunQueueSource).
template <typename T>
class Source {
 public:
  T read(T (*fromProc)()) {
    {
      std::lock_guard lock(mutex_);
      if (stub_) return stub_();
    }
    return fromProc();
  }
  void set(std::function<T()> stub) {
    std::lock_guard lock(mutex_);
    stub_ = std::move(stub);
  }

 private:
  std::mutex mutex_;
  std::function<T()> stub_;
};

Source<CpuTicks>& ticksSource() {
  static Source<CpuTicks> s;
  return s;
}
Source<double>& runQueueSource() {
  static Source<double> s;
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

// "<on-cpu ns> <run-delay ns> <timeslices>\n"; read with plain system calls, as it is read around
// every timed kernel run.
double runDelayFromProc() {
  const int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NAN;
  char text[128];
  const ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return NAN;
  text[n] = 0;
  char* end = nullptr;
  std::strtoull(text, &end, 10);  // time on a core
  if (end == text) return NAN;
  const char* delay = end;
  const unsigned long long ns = std::strtoull(delay, &end, 10);
  return end == delay ? NAN : double(ns) * 1e-9;
}

}  // namespace

double runQueueSeconds() { return runQueueSource().read(runDelayFromProc); }

void setRunQueueSource(std::function<double()> s) { runQueueSource().set(std::move(s)); }

bool waitedForCores(double waited, double seconds) { return waited > 0.02 * seconds && waited > 50e-6; }

CpuTicks cpuTicksNow() { return ticksSource().read(fromProc); }

void setCpuTicksSource(std::function<CpuTicks()> s) { ticksSource().set(std::move(s)); }

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
