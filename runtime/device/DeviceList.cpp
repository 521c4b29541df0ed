// parseDeviceList and makeDevice: the backend's name picks the Driver, which does the rest.
#include "runtime/device/DeviceList.h"

#include <cstdlib>

#include "runtime/base/Error.h"
#include "runtime/device/Driver.h"

namespace spmd::runtime {

int wholeNumber(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(text);
}

const Driver& DeviceList::driver() const { return driverFor(backend, spec); }

int DeviceList::sharing(int replica) const {
  int count = 0;
  for (int d : devices) count += d == devices.at(replica);
  return count;
}

std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) {
  return list.driver().makeDevice(list, replica);
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
  list.devices = driverFor(list.backend, spec).parse(spec, rest, colon != std::string::npos);
  if (list.devices.empty())
    throw Error("device list '" + spec + "' is empty (0 devices): ask for at least one");
  return list;
}

}  // namespace spmd::runtime
