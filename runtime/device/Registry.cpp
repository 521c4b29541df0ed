// The driver registry. Built-in backends come from the CMake list SPMD_BACKENDS (the generated
// Backends.inc: SPMD_BACKEND(name) for each one built, SPMD_ABSENT_BACKEND(name, why) for each
// optional one left out), each registered by its `registerDriver_<name>()` on first use.
#include "runtime/device/Driver.h"

#include <mutex>

#include "runtime/device/DeviceList.h"
#include "runtime/device/InProcessCommunicator.h"

namespace spmd::runtime {

#define SPMD_BACKEND(name) void registerDriver_##name();
#define SPMD_ABSENT_BACKEND(name, why)
#include "runtime/device/Backends.inc"
#undef SPMD_BACKEND
#undef SPMD_ABSENT_BACKEND

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::unique_ptr<Driver>> drivers;
};

// The drivers themselves; never destroyed, since devices may be released during static
// destruction.
Registry& storage() {
  static Registry* instance = new Registry;
  return *instance;
}

// The drivers, the built-in ones registered on first use.
Registry& registry() {
  static std::once_flag builtins;
  std::call_once(builtins, [] {
#define SPMD_BACKEND(name) registerDriver_##name();
#define SPMD_ABSENT_BACKEND(name, why)
#include "runtime/device/Backends.inc"
#undef SPMD_BACKEND
#undef SPMD_ABSENT_BACKEND
  });
  return storage();
}

// Why an optional backend is not in this build; empty for a name no build knows.
std::string whyAbsent(const std::string& backend) {
#define SPMD_BACKEND(name)
#define SPMD_ABSENT_BACKEND(name, why) \
  if (backend == #name) return why;
#include "runtime/device/Backends.inc"
#undef SPMD_BACKEND
#undef SPMD_ABSENT_BACKEND
  return "";
}

}  // namespace

std::vector<std::unique_ptr<Communicator>> Driver::makeCommunicators(
    const DeviceList& list, std::chrono::milliseconds timeout, const Job& job, int leavesPerReplica) const {
  if (job.info().size > 1) return job.communicators(list.size(), timeout, leavesPerReplica);
  auto group = std::make_shared<InProcessGroup>(list.size(), timeout, leavesPerReplica);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < list.size(); ++r) comms.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return comms;
}

void registerDriver(std::unique_ptr<Driver> driver) {
  Registry& r = storage();
  std::lock_guard lock(r.mutex);
  for (const auto& d : r.drivers)
    if (d->name() == driver->name())
      throw Error("backend '" + driver->name() + "' is registered twice");
  r.drivers.push_back(std::move(driver));
}

const Driver& driverFor(const std::string& backend, const std::string& spec) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::string forms;
  for (const auto& d : r.drivers) {
    if (d->name() == backend) return *d;
    forms += (forms.empty() ? "" : "; ") + d->forms();
  }
  std::string why = whyAbsent(backend);
  if (!why.empty())
    throw Error("device list '" + spec + "': this build of spmd has no " + backend + " backend (" + why +
                "); use a backend this build has instead: " + forms);
  throw Error("device list '" + spec + "': unknown backend '" + backend + "'; valid forms: " + forms);
}

int availableDevices(const std::string& backend, std::string* why) {
  std::string absent = whyAbsent(backend);
  if (!absent.empty()) {
    if (why) *why = "this build of spmd has no " + backend + " backend (" + absent + ")";
    return 0;
  }
  return driverFor(backend, backend).available(why);
}

std::vector<std::string> driverNames() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::vector<std::string> names;
  for (const auto& d : r.drivers) names.push_back(d->name());
  return names;
}

}  // namespace spmd::runtime
