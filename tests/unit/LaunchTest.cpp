// Kernel launches against sm_90's limits (runtime/kernels/Launch.h), which the CUDA backend
// checks before each launch and the simulator checks for the same loops: a launch a GPU would
// refuse, or one a kernel cannot run correctly with, fails here without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/base/Error.h"
#include "runtime/kernels/Norm.h"
#include "runtime/kernels/Launch.h"

namespace spmd {
namespace {

using runtime::kernels::Launch;

std::string errorOf(const Launch& launch) {
  try {
    runtime::kernels::checkLaunch(launch, "'batch_norm_train' at model.cpp:9");
    return "no error";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(LaunchTest, LaunchesBeyondTheDevicesLimitsAreRefusedNamingKernelAndStep) {
  const std::string at = "launch of kernel NormSliceFn ('batch_norm_train' at model.cpp:9): ";
  Launch good = runtime::kernels::sliceLaunch("NormSliceFn", 64, runtime::kernels::slicesOf(64 * 28 * 28), 64 * 64 * 28 * 28);
  EXPECT_EQ(errorOf(good), "no error");
  Launch l = good;
  l.threads = 2048;
  EXPECT_EQ(errorOf(l), at + "2048 threads per block; sm_90 allows 1 to 1024");
  l = good;
  l.threads = 257;  // an off-by-one block: its tree reduction would drop a thread's partial sum
  EXPECT_EQ(errorOf(l), at + "257 threads per block, but its block-wide tree reduction needs a power of two");
  l = good;
  l.blocks = 0;
  EXPECT_EQ(errorOf(l), at + "0 blocks; sm_90 allows 1 to 2147483647 in x");
  l = good;
  l.staticShared = 64 * 1024;
  EXPECT_EQ(errorOf(l), at + "65536 bytes of static shared memory per block; sm_90 allows 49152");
  l = good;
  l.dynamicShared = 256 * 1024;
  EXPECT_EQ(errorOf(l), at + "262144 bytes of shared memory per block; sm_90 allows 232448");
  l = good;
  l.index64 = false;
  l.elements = int64_t(3) << 30;
  EXPECT_EQ(errorOf(l), at + "3221225472 elements overflow its 32-bit index; index it in 64 bits");
}

// The geometry every launch of a step uses: grid-stride loops of any length (capped blocks, the
// rest strided) and the two-stage reductions' (channel, slice) blocks at ResNet-18's widths and
// batch sizes and beyond, whose slices cover every element once.
TEST(LaunchTest, EveryLaunchShapeTheBackendsUseFits) {
  for (int64_t n : {int64_t(1), int64_t(255), int64_t(256), int64_t(257), int64_t(1) << 20, int64_t(1) << 31,
                    int64_t(1) << 40}) {
    Launch l = runtime::kernels::gridStride("forEach", n);
    EXPECT_EQ(errorOf(l), "no error") << n;
    EXPECT_GE(l.blocks * l.threads, std::min<int64_t>(n, 65535 * 8 * 256)) << n;
  }
  for (int64_t channels : {16, 64, 128, 256, 512, 2048})
    for (int64_t elements : {int64_t(1), int64_t(8191), int64_t(8193), int64_t(512) * 56 * 56, int64_t(1) << 33}) {
      const runtime::kernels::Slices s = runtime::kernels::slicesOf(elements);
      EXPECT_EQ(errorOf(runtime::kernels::sliceLaunch("NormSliceFn", channels, s, channels * elements)), "no error");
      EXPECT_GE(s.slices, 1);
      EXPECT_LE(s.slices, runtime::kernels::kMaxSlices);
      EXPECT_EQ(s.begin(0), 0);
      EXPECT_EQ(s.end(s.slices - 1), elements) << "the last slice ends at the last element";
      EXPECT_LT(s.begin(s.slices - 1), elements) << "no slice is empty";
      EXPECT_LE(s.per, std::max(runtime::kernels::kSliceElements, (elements + runtime::kernels::kMaxSlices - 1) /
                                                                      runtime::kernels::kMaxSlices));
    }
}

}  // namespace
}  // namespace spmd
