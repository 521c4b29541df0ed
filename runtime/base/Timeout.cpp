#include "runtime/base/Timeout.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

namespace spmd::runtime {

std::chrono::milliseconds collectiveTimeoutFromEnvironment(double seconds) {
  if (seconds <= 0) {
    seconds = envNumber("SPMD_COLLECTIVE_TIMEOUT", 1e-3, 1e7).value_or(300);  // seconds
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace spmd::runtime
