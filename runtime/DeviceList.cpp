// parseDeviceList: "cpu", "cpu:N", "cuda", "cuda:0,1", "cuda:0*4".
#include "runtime/DeviceList.h"

#include <cstdlib>

#include "runtime/Error.h"

namespace spmd::runtime {
namespace {

const char* kForms = "valid forms: cpu, cpu:N (N emulated devices), cuda, cuda:0,1, cuda:0*4";

// A whole number of at most six digits, or -1.
int wholeNumber(const std::string& text) {
  if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(text);
}

}  // namespace

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
  if (list.backend == "cuda")
    throw Error("device list '" + spec + "': the CUDA backend is not built yet; use cpu:N");
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
