// checkLaunch: a launch against the device's limits.
#include "runtime/kernels/Launch.h"

#include "runtime/base/Error.h"

namespace spmd::runtime::kernels {

void checkLaunch(const Launch& l, const std::string& where, const LaunchLimits& limits) {
  auto fail = [&](const std::string& why) {
    throw Error("launch of kernel " + std::string(l.kernel) + " (" + where + "): " + why);
  };
  if (l.threads < 1 || l.threads > limits.maxThreadsPerBlock)
    fail(std::to_string(l.threads) + " threads per block; sm_90 allows 1 to " + std::to_string(limits.maxThreadsPerBlock));
  if (l.powerOfTwoBlock && (l.threads & (l.threads - 1)) != 0)
    fail(std::to_string(l.threads) + " threads per block, but its block-wide tree reduction needs a power of two");
  if (l.blocks < 1 || l.blocks > limits.maxBlocks)
    fail(std::to_string(l.blocks) + " blocks; sm_90 allows 1 to " + std::to_string(limits.maxBlocks) + " in x");
  if (l.staticShared > limits.maxStaticShared)
    fail(std::to_string(l.staticShared) + " bytes of static shared memory per block; sm_90 allows " +
         std::to_string(limits.maxStaticShared));
  if (l.staticShared + l.dynamicShared > limits.maxDynamicShared)
    fail(std::to_string(l.staticShared + l.dynamicShared) + " bytes of shared memory per block; sm_90 allows " +
         std::to_string(limits.maxDynamicShared));
  if (!l.index64 && l.elements > 2147483647)
    fail(std::to_string(l.elements) + " elements overflow its 32-bit index; index it in 64 bits");
}

}  // namespace spmd::runtime::kernels
