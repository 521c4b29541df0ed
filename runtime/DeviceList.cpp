// parseDeviceList: "cpu", "cpu:N", "cuda", "cuda:0,1", "cuda:0*4"; makeDevice.
#include "runtime/DeviceList.h"

#include <cstdlib>
#include <sstream>

#include "runtime/Error.h"
#include "runtime/cpu/CpuDevice.h"
#ifdef SPMD_WITH_CUDA
#include "runtime/cuda/CudaDevice.h"
#endif

namespace spmd::runtime {
namespace {

const char* kForms = "valid forms: cpu, cpu:N (N emulated devices), cuda, cuda:0,1, cuda:0*4";

// A whole number of at most six digits, or -1.
int wholeNumber(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(text);
}

// "cuda" (every GPU), "cuda:0,1", "cuda:0*4", "cuda:0*2,1*2".
DeviceList parseCuda(DeviceList list, const std::string& rest, bool hasColon) {
  const std::string& spec = list.spec;
  if (!cudaBackendBuilt())
    throw Error("device list '" + spec + "': this build of spmd has no CUDA backend (nvcc and the CUDA "
                "toolkit were not found when configuring); use cpu:N, or rebuild where /usr/local/cuda exists");
  if (hasColon && rest.empty())
    throw Error("device list '" + spec + "' is empty: give GPU numbers after 'cuda:', e.g. cuda:0 or cuda:0*2");
  std::string why;
  int available = visibleCudaDevices(&why);
  if (available == 0)
    throw Error("device list '" + spec + "': no CUDA GPU is visible (" + why + "); use cpu:N to run on the CPU");
  if (!hasColon) {
    for (int i = 0; i < available; ++i) list.devices.push_back(i);
    return list;
  }
  std::stringstream items(rest);
  std::string item;
  while (std::getline(items, item, ',')) {
    size_t star = item.find('*');
    int index = wholeNumber(item.substr(0, star));
    int copies = star == std::string::npos ? 1 : wholeNumber(item.substr(star + 1));
    if (index < 0 || copies < 1)
      throw Error("device list '" + spec + "': '" + item + "' is not a GPU number or GPU*replicas; " + kForms);
    if (index >= available)
      throw Error("device list '" + spec + "' names GPU " + std::to_string(index) + " but " +
                  std::to_string(available) + " GPU(s) are visible (cuda:0 to cuda:" + std::to_string(available - 1) + ")");
    for (int c = 0; c < copies; ++c) list.devices.push_back(index);
  }
  return list;
}

}  // namespace

bool cudaBackendBuilt() {
#ifdef SPMD_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int visibleCudaDevices(std::string* why) {
#ifdef SPMD_WITH_CUDA
  return cudaDeviceCount(why);
#else
  if (why) *why = "spmd was built without the CUDA backend (no nvcc when configuring)";
  return 0;
#endif
}

std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) {
  int index = list.devices.at(replica);
#ifdef SPMD_WITH_CUDA
  if (list.backend == "cuda") {
    int sharing = 0;
    for (int d : list.devices) sharing += d == index;
    return std::make_shared<CudaDevice>(index, sharing > 1 ? replica : -1);
  }
#endif
  if (list.backend != "cpu") throw Error("no device of backend '" + list.backend + "' in this build");
  return std::make_shared<CpuDevice>(index);
}

int emulatedCpuDeviceCount() {
  if (const char* env = std::getenv("SPMD_CPU_DEVICE_COUNT")) {
    int count = wholeNumber(env);
    if (count < 1)
      throw Error("SPMD_CPU_DEVICE_COUNT='" + std::string(env) + "' must be a positive whole number");
    return count;
  }
  return 8;
}

DeviceList parseDeviceList(const std::string& text) {
  std::string spec = text;
  if (spec.empty()) {
    const char* env = std::getenv("SPMD_DEVICES");
    spec = env && *env ? env : "cpu:1";
  }
  DeviceList list;
  list.spec = spec;
  size_t colon = spec.find(':');
  list.backend = spec.substr(0, colon);
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  if (list.backend == "cuda") return parseCuda(list, rest, colon != std::string::npos);
  if (list.backend != "cpu")
    throw Error("device list '" + spec + "': unknown backend '" + list.backend + "'; " + kForms);
  if (colon != std::string::npos && rest.empty())
    throw Error("device list '" + spec + "' is empty: give a device count after 'cpu:', e.g. cpu:2");
  int count = colon == std::string::npos ? 1 : wholeNumber(rest);
  if (count < 0)
    throw Error("device list '" + spec + "': '" + rest + "' is not a device number; " + kForms);
  if (count == 0)
    throw Error("device list '" + spec + "' is empty (0 devices): ask for at least one, e.g. cpu:1");
  int available = emulatedCpuDeviceCount();
  if (count > available)
    throw Error("device list '" + spec + "' asks for " + std::to_string(count) +
                " CPU devices but " + std::to_string(available) +
                " exist; use at most cpu:" + std::to_string(available) +
                " or set SPMD_CPU_DEVICE_COUNT=" + std::to_string(count) + " to emulate more");
  for (int i = 0; i < count; ++i) list.devices.push_back(i);
  return list;
}

}  // namespace spmd::runtime
