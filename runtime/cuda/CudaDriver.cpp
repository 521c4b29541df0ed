// The cuda driver: device lists cuda (every GPU), cuda:0,1, cuda:0*4 (four replicas sharing
// GPU 0), CudaDevice per replica; replicas on distinct GPUs (or in several processes) join
// through NCCL (runtime/cuda/Nccl.h), replicas sharing a GPU through the in-process
// communicator, whose pointer exchange the on-device collectives use (kernels/Collectives.h).
#include <map>
#include <mutex>
#include <sstream>

#include "runtime/cuda/CudaDevice.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Variants.h"
#if SPMD_WITH_NCCL
#include "runtime/cuda/Nccl.h"
#endif

namespace spmd::runtime {
namespace {

class CudaDriver final : public Driver {
 public:
  std::string name() const override { return "cuda"; }
  std::string forms() const override { return "cuda (every GPU), cuda:0,1, cuda:0*4 (4 replicas on GPU 0)"; }
  int available(std::string* why) const override { return cudaDeviceCount(why); }
  const KernelTable& kernels() const override { return cudaKernels(); }
  std::string activationLayout() const override { return cudaChannelsLast() ? kChannelsLast : ""; }
  Bf16Kernels bf16Kernels() const override {
    static const std::string blocker = cudaBf16Blocker();
    if (blocker.empty()) return {true, "cuDNN's and cuBLAS's bf16 kernels (f32 accumulation)"};
    return {false, "emulated: the f32 kernels between bf16 roundings (" + blocker + ")"};
  }

  std::vector<int> parse(const std::string& spec, const std::string& rest, bool hasColon) const override {
    if (hasColon && rest.empty())
      throw Error("device list '" + spec + "' is empty: give GPU numbers after 'cuda:', e.g. cuda:0 or cuda:0*2");
    std::string why;
    int count = available(&why);
    if (count == 0)
      throw Error("device list '" + spec + "': no CUDA GPU is visible (" + why + "); use cpu:N or sim:N instead");
    std::vector<int> devices;
    if (!hasColon) {
      for (int i = 0; i < count; ++i) devices.push_back(i);
      return devices;
    }
    std::stringstream items(rest);
    std::string item;
    while (std::getline(items, item, ',')) {
      size_t star = item.find('*');
      int index = wholeNumber(item.substr(0, star));
      int copies = star == std::string::npos ? 1 : wholeNumber(item.substr(star + 1));
      if (index < 0 || copies < 1)
        throw Error("device list '" + spec + "': '" + item + "' is not a GPU number or GPU*replicas; valid forms: " + forms());
      if (index >= count)
        throw Error("device list '" + spec + "' names GPU " + std::to_string(index) + " but " + std::to_string(count) +
                    " GPU(s) are visible (cuda:0 to cuda:" + std::to_string(count - 1) + ")");
      for (int c = 0; c < copies; ++c) devices.push_back(index);
    }
    return devices;
  }

  // NCCL for replicas on distinct GPUs and across processes (runtime/cuda/Nccl.h); replicas
  // sharing a GPU exchange device pointers through the in-process communicator.
  std::vector<std::unique_ptr<Communicator>> makeCommunicators(const DeviceList& list, std::chrono::milliseconds timeout,
                                                               const Job& job, int leavesPerReplica) const override {
    if (leavesPerReplica != 1)
      throw Error("device list '" + list.spec + "': gradient accumulation runs on cpu and sim devices so far (the "
                  "CUDA backend's all-reduces fold one leaf per replica, and it has not run on a GPU); run it on "
                  "cpu:K, or give the step more replicas instead");
    auto host = Driver::makeCommunicators(list, timeout, job);
#if SPMD_WITH_NCCL
    if (useNccl(list, job.info().size)) return makeNcclCommunicators(list, std::move(host), job, timeout);
#endif
    return host;
  }

  // One CudaDevice (stream, library handles) per GPU and replica slot, shared by every compiled
  // function while any holds it, so their device-resident values are interchangeable.
  std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) const override {
    int index = list.devices.at(replica);
    int slot = list.sharing(replica) > 1 ? replica : -1;
    std::lock_guard lock(mutex_);
    auto& cached = devices_[{index, slot}];
    if (auto device = cached.lock()) return device;
    auto device = std::make_shared<CudaDevice>(index, slot);
    cached = device;
    return device;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, int>, std::weak_ptr<Device>> devices_;
};

}  // namespace

void registerDriver_cuda() { registerDriver(std::make_unique<CudaDriver>()); }

}  // namespace spmd::runtime
