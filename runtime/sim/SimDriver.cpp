// The sim driver: device lists sim / sim:N, one SimDevice (and stream thread) per index, shared
// by every compiled function while any holds it, so device-resident values pass between them.
#include <map>
#include <mutex>

#include "runtime/cpu/CpuDriver.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Variants.h"
#include "runtime/sim/SimDevice.h"

namespace spmd::runtime {
namespace {

class SimDriver final : public Driver {
 public:
  std::string name() const override { return "sim"; }
  std::string forms() const override { return "sim, sim:N (N simulated accelerators running the CUDA kernel code on the host)"; }
  std::vector<int> parse(const std::string& spec, const std::string& rest, bool hasColon) const override {
    return parseEmulatedCount(spec, rest, hasColon, forms());
  }
  int available(std::string*) const override { return emulatedCpuDeviceCount(); }
  const KernelTable& kernels() const override { return simKernels(); }
  // The CUDA backend's layouts, so that their kernels run here first.
  std::string activationLayout() const override { return cudaChannelsLast() ? kChannelsLast : ""; }
  std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) const override {
    int index = list.devices.at(replica);
    std::lock_guard lock(mutex_);
    auto& cached = devices_[index];
    if (auto device = cached.lock()) return device;
    auto device = std::make_shared<SimDevice>(index);
    cached = device;
    return device;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<int, std::weak_ptr<Device>> devices_;
};

}  // namespace

void registerDriver_sim() { registerDriver(std::make_unique<SimDriver>()); }

}  // namespace spmd::runtime
