// Device lists, named the same way on command lines and in code: "cpu:8" (eight emulated CPU
// devices), "cpu" (one), "sim:4" (four simulated accelerators), "cuda" (every GPU), "cuda:0,1",
// "cuda:0*4" (four replicas on GPU 0). The text before ':' names the backend's Driver, which
// reads the rest. The default comes from SPMD_DEVICES, else "cpu:1".
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace spmd::runtime {

class Device;
class Driver;

struct DeviceList {
  std::string backend;       // the driver's name: "cpu", "sim", "cuda"
  std::vector<int> devices;  // one entry per replica: the device index it runs on
  std::string spec;          // the text it was parsed from, for messages

  int size() const { return static_cast<int>(devices.size()); }
  const Driver& driver() const;
  // Replicas of this list that run on device `devices[replica]` (several for "cuda:0*4").
  int sharing(int replica) const;
};

// Parses a device list; empty text means SPMD_DEVICES, else "cpu:1". Throws spmd::Error saying
// what is wrong and what would be valid.
DeviceList parseDeviceList(const std::string& text);

// The device replica `replica` of `list` runs on (from the list's driver).
std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica);

// A whole number of at most six digits, or -1 (for drivers reading device counts and indices).
int wholeNumber(const std::string& text);

}  // namespace spmd::runtime
