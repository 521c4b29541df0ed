// GPU blocks on the simulator (runtime/sim/BlockEmulator.h): the library's block-wide sum gives
// exact sums under many random schedules, and each way a block kernel can be broken on a GPU
// (a missing barrier, an off-by-one block against its shared memory, an uninitialized shared
// read, a barrier only some threads reach) fails with an error naming kernel, step, thread and
// the seed that reproduces it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "runtime/base/Error.h"
#include "runtime/kernels/Norm.h"
#include "runtime/sim/BlockEmulator.h"

namespace spmd {
namespace {

using runtime::kernels::Launch;
using runtime::sim::SimBlock;

Launch blocks(int64_t count, int threads, size_t sharedBytes) {
  return {"TestKernel", count, threads, 0, sharedBytes, 0, true, true};
}

std::string errorOf(const Launch& launch, const std::function<void(SimBlock&)>& body) {
  try {
    runtime::sim::runBlocks(launch, "step 4 'reduce' (model.cpp:7)", body);
    return "no error";
  } catch (const Error& e) {
    return e.what();
  }
}

struct SeedGuard {
  explicit SeedGuard(const char* seed) { setenv("SPMD_SIM_SEED", seed, 1); }
  ~SeedGuard() { unsetenv("SPMD_SIM_SEED"); }
};

TEST(BlockEmulatorTest, BlockSumsAreExactUnderRandomSchedules) {
  std::set<std::vector<int>> orders;
  for (const char* seed : {"1", "2", "3", "77"}) {
    SeedGuard guard(seed);
    std::vector<double> sums(6, -1);
    std::vector<int> firstBlockOrder;
    runtime::sim::runBlocks(blocks(6, 256, 256 * sizeof(double)), "test", [&](SimBlock& b) {
      if (b.block() == 2) firstBlockOrder.push_back(b.thread());
      double total = runtime::kernels::blockSum(b, double(b.block() + 1) * b.thread());
      if (b.thread() == 0) sums[size_t(b.block())] = total;
    });
    for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(sums[size_t(k)], double(k + 1) * 255 * 256 / 2) << "seed " << seed;
    ASSERT_EQ(firstBlockOrder.size(), 256u);
    orders.insert(firstBlockOrder);
  }
  EXPECT_EQ(orders.size(), 4u) << "each seed should start the block's threads in its own order";
}

// blockSum (runtime/kernels/Norm.h) without the barrier inside its tree loop.
double sumWithoutInnerBarrier(SimBlock& b, double v) {
  auto shared = b.shared<double>();
  shared[b.thread()] = v;
  b.sync();
  for (int width = b.blockSize() / 2; width > 0; width /= 2)
    if (b.thread() < width) shared[b.thread()] += shared[b.thread() + width];
  b.sync();
  return shared[0];
}

TEST(BlockEmulatorTest, AMissingBarrierIsASharedMemoryRace) {
  std::string error = errorOf(blocks(4, 64, 64 * sizeof(double)), [](SimBlock& b) { sumWithoutInnerBarrier(b, 1.0); });
  EXPECT_NE(error.find("sim: kernel TestKernel (step 4 'reduce' (model.cpp:7)), thread "), std::string::npos) << error;
  EXPECT_NE(error.find("since the last barrier (__syncthreads): a shared-memory race (SPMD_SIM_SEED=1, launch "),
            std::string::npos)
      << error;
}

TEST(BlockEmulatorTest, AnOffByOneBlockOverrunsItsSharedMemory) {
  // 257 threads against shared memory sized for 256, as a kernel launched with one thread too many.
  std::string error = errorOf(blocks(2, 257, 256 * sizeof(double)), [](SimBlock& b) { runtime::kernels::blockSum(b, 1.0); });
  EXPECT_NE(error.find("thread 256 of block "), std::string::npos) << error;
  EXPECT_NE(error.find(" writes shared byte 2048, past the launch's 2048 bytes of shared memory"), std::string::npos)
      << error;
}

TEST(BlockEmulatorTest, ReadingSharedMemoryNoThreadWroteFails) {
  std::string error = errorOf(blocks(3, 32, 32 * sizeof(float)), [](SimBlock& b) {
    auto shared = b.shared<float>();
    if (b.thread() != 5) shared[b.thread()] = 1.0f;
    b.sync();
    volatile float v = shared[(b.thread() + 1) % 32];
    (void)v;
  });
  EXPECT_NE(error.find("thread 4 of block "), std::string::npos) << error;
  EXPECT_NE(error.find(" reads shared byte 20, which no thread of its block has written"), std::string::npos) << error;
}

TEST(BlockEmulatorTest, ABarrierOnlySomeThreadsReachFails) {
  std::string error = errorOf(blocks(1, 32, 0), [](SimBlock& b) {
    if (b.thread() < 5) b.sync();
  });
  EXPECT_NE(error.find("a barrier (__syncthreads) that only 5 of the block's 32 threads reached; the others left "
                       "the kernel: every thread of a block must reach each barrier"),
            std::string::npos)
      << error;
}

TEST(BlockEmulatorTest, AKernelsErrorNamesItsThreadAndBlockAndTheBadSeedIsRefused) {
  std::string error = errorOf(blocks(2, 8, 0), [](SimBlock& b) {
    b.sync();
    if (b.thread() == 3 && b.block() == 1) throw Error("index 9 out of range");
  });
  EXPECT_NE(error.find("thread 3 of block 1: index 9 out of range"), std::string::npos) << error;
  SeedGuard guard("twelve");
  EXPECT_EQ(errorOf(blocks(1, 1, 0), [](SimBlock&) {}),
            "SPMD_SIM_SEED needs a whole number from 0 to 9223372036854775807, got 'twelve'");
}

}  // namespace
}  // namespace spmd
