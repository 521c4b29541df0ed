// The switch of the in-process collectives' device-side rendezvous (Collectives.h).
#include <atomic>

#include "runtime/base/Parse.h"
#include "runtime/kernels/Collectives.h"

namespace spmd::runtime::kernels {
namespace {
std::atomic<int> rendezvousOverride{-1};  // -1: the variable decides
}  // namespace

bool deviceRendezvousWanted() {
  static const bool on = envSwitch("SPMD_DEVICE_RENDEZVOUS").value_or(true);
  const int forced = rendezvousOverride.load();
  return forced < 0 ? on : forced == 1;
}

void setDeviceRendezvous(std::optional<bool> on) { rendezvousOverride = on ? int(*on) : -1; }

}  // namespace spmd::runtime::kernels
