// Device lists, named the same way on command lines and in code: "cpu:8" (eight emulated CPU
// devices), "cpu" (one), "cuda" (every GPU), "cuda:0,1", "cuda:0*4" (four replicas on GPU 0).
// The default comes from SPMD_DEVICES, else "cpu:1".
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace spmd::runtime {

class Device;

struct DeviceList {
  std::string backend;       // "cpu" or "cuda"
  std::vector<int> devices;  // one entry per replica: the device index it runs on
  std::string spec;          // the text it was parsed from, for messages

  int size() const { return static_cast<int>(devices.size()); }
};

// How many CPU devices the host emulates: SPMD_CPU_DEVICE_COUNT, else 8 (as many as the
// SPMD tests use; any count works, the replicas then share the cores).
int emulatedCpuDeviceCount();

// Parses a device list; empty text means SPMD_DEVICES, else "cpu:1". Throws spmd::Error saying
// what is wrong and what would be valid.
DeviceList parseDeviceList(const std::string& text);

// The device replica `replica` of `list` runs on (a CpuDevice or a CudaDevice).
std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica);

// Whether this build has the CUDA backend (nvcc and the toolkit were found when configuring).
bool cudaBackendBuilt();
// GPUs the CUDA backend can use; 0 with `why` saying why (not built, no driver, no device).
int visibleCudaDevices(std::string* why = nullptr);

}  // namespace spmd::runtime
