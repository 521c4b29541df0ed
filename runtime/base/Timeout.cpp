#include "runtime/base/Timeout.h"

#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/base/Error.h"

namespace spmd::runtime {

std::chrono::milliseconds collectiveTimeoutFromEnvironment(double seconds) {
  if (seconds <= 0) {
    const char* env = std::getenv("SPMD_COLLECTIVE_TIMEOUT");
    seconds = 300;
    if (env && *env) {
      char* end = nullptr;
      seconds = std::strtod(env, &end);
      if (*end || !(seconds > 0) || seconds > 1e7)
        throw Error("SPMD_COLLECTIVE_TIMEOUT='" + std::string(env) +
                    "' must be a positive number of seconds (at most 1e7)");
    }
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace spmd::runtime
