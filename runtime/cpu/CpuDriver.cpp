// The cpu driver: device lists cpu / cpu:N, CpuDevice, OpenMP threads per replica.
#include "runtime/cpu/CpuDriver.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"

namespace spmd::runtime {

int emulatedCpuDeviceCount() {
  if (const char* env = std::getenv("SPMD_CPU_DEVICE_COUNT")) {
    int count = wholeNumber(env);
    if (count < 1)
      throw Error("SPMD_CPU_DEVICE_COUNT='" + std::string(env) + "' must be a positive whole number");
    return count;
  }
  return 8;
}

int cpuThreadsPerReplica(int replicas) { return std::max(1, omp_get_max_threads() / std::max(1, replicas)); }

// Parses "N" of "<name>:N" as a count of emulated devices (shared with the sim backend).
std::vector<int> parseEmulatedCount(const std::string& spec, const std::string& rest, bool hasColon,
                                    const std::string& forms) {
  std::string backend = spec.substr(0, spec.find(':'));
  std::string kind = backend == "cpu" ? "CPU devices" : backend + " devices";
  if (hasColon && rest.empty())
    throw Error("device list '" + spec + "' is empty: give a device count after '" + backend + ":', e.g. " +
                backend + ":2");
  int count = hasColon ? wholeNumber(rest) : 1;
  if (count < 0) throw Error("device list '" + spec + "': '" + rest + "' is not a device number; valid forms: " + forms);
  if (count == 0) throw Error("device list '" + spec + "' is empty (0 devices): ask for at least one, e.g. " +
                              backend + ":1");
  int available = emulatedCpuDeviceCount();
  if (count > available)
    throw Error("device list '" + spec + "' asks for " + std::to_string(count) + " " + kind + " but " +
                std::to_string(available) + " exist; use at most " + backend + ":" +
                std::to_string(available) + " or set SPMD_CPU_DEVICE_COUNT=" + std::to_string(count) +
                " to emulate more");
  std::vector<int> devices;
  for (int i = 0; i < count; ++i) devices.push_back(i);
  return devices;
}

namespace {

class CpuDriver final : public Driver {
 public:
  std::string name() const override { return "cpu"; }
  std::string forms() const override { return "cpu, cpu:N (N emulated devices)"; }
  std::vector<int> parse(const std::string& spec, const std::string& rest, bool hasColon) const override {
    return parseEmulatedCount(spec, rest, hasColon, forms());
  }
  int available(std::string*) const override { return emulatedCpuDeviceCount(); }
  std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) const override {
    return std::make_shared<CpuDevice>(list.devices.at(replica));
  }
  int64_t channelBlock() const override { return CpuDevice(0).channelBlock(); }
  void prepareReplicaThread(const DeviceList& list, int) const override {
    // The replicas share the cores: each gets its part of the OpenMP threads oneDNN uses.
    omp_set_num_threads(cpuThreadsPerReplica(list.size()));
  }
};

}  // namespace

void registerDriver_cpu() { registerDriver(std::make_unique<CpuDriver>()); }

}  // namespace spmd::runtime
