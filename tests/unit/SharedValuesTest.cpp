// Values the in-process replicas of a group make once per call (runtime/device/SharedValues.h):
// the Winograd filter transforms of replicated weights. Each replica's output keeps the bits it
// has alone, whether it made the transform, made parts of it or read it; a replica whose weights
// differ makes its own, and so does each replica of a step past the budget; a part's maker that
// throws leaves the others to make their own.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "KernelCases.h"
#include "TestUtil.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Job.h"
#include "runtime/device/SharedValues.h"
#include "runtime/exec/ReplicaGroup.h"

namespace spmd::runtime {
namespace {

constexpr int kReplicas = 4;

// A 3x3 stride-1 convolution that every Winograd variant computes: x [2, C, 10, 9] in nChw8c,
// weights drawn from `weightSeed`; the forward (with bias) or the input gradient.
KernelCase convCase(const std::string& op, int64_t channels, uint64_t xSeed, uint64_t weightSeed) {
  const std::map<std::string, Attr> attrs = {{"stride", std::vector<int64_t>{1, 1}},
                                             {"padding", std::vector<int64_t>{1, 1}}};
  Array x = testing::randomArray(DType::f32, {2, channels, 10, 9}, xSeed);
  Array w = testing::randomArray(DType::f32, {channels, channels, 3, 3}, weightSeed);
  if (op == "conv2d")
    return {"conv2d", op, {x, w, testing::randomArray(DType::f32, {channels}, 7)},
            {{DType::f32, {2, channels, 10, 9}}}, attrs, {"nChw8c", "", "", "nChw8c"}};
  return {"conv2d_backward_data", op, {x, w}, {{DType::f32, {2, channels, 10, 9}}}, attrs, {"nChw8c", "", "nChw8c"}};
}

// Runs `cases` (one per replica, the same op and shapes) as one call of a cpu:4 group, twice,
// and checks each replica's outputs against the kernel run alone, bit for bit. Returns the
// values the replicas read instead of making them whole.
int64_t runOnFourReplicas(ReplicaGroup& group, const std::vector<KernelCase>& cases) {
  std::vector<std::vector<Array>> inputs, outputs;
  for (const KernelCase& c : cases) {
    inputs.push_back(inputsInLayout(c));
    outputs.push_back({Array::zeros(DType::f32, c.outputs[0].second)});
  }
  group.run(inputs, outputs);
  for (int r = 0; r < kReplicas; ++r) {
    SCOPED_TRACE("replica " + std::to_string(r));
    std::vector<Array> got = outputs[size_t(r)];
    outputsToPlain(cases[size_t(r)], got);
    testing::expectSameBits(got[0], runKernel(cpuKernels(), cases[size_t(r)])[0], "the output");
  }
  return group.sharedValues()->reads();
}

TEST(SharedValuesTest, ReplicasWithTheSameWeightsShareTheFilterTransformAndKeepTheirBits) {
  for (const char* op : {"conv2d", "conv2d_backward_data"})
    for (const auto& [variant, channels] : std::vector<std::pair<const char*, int64_t>>{
             {"winograd_grouped", 16}, {"winograd_chunked", 80}, {"winograd_4x4", 16}}) {
      SCOPED_TRACE(std::string(op) + " " + variant);
      PinnedKernels pin(std::string(op) + ":" + variant);
      std::vector<KernelCase> cases;
      for (int r = 0; r < kReplicas; ++r) cases.push_back(convCase(op, channels, 100 + r, 5));
      ReplicaGroup group(oneStepProgram(cases[0], "SharedValuesTest"), parseDeviceList("cpu:4"), Job::single(),
                         std::chrono::seconds(30));
      ASSERT_NE(group.sharedValues(), nullptr);
      // Four replicas and at most 16 parts: at least three of them make less than the whole.
      const int64_t first = runOnFourReplicas(group, cases);
      EXPECT_GE(first, kReplicas - 1);
      EXPECT_GT(group.sharedValues()->bytes(), 0u);
      // The next call's weights (an optimizer's step) are made again, not the last call's read.
      for (KernelCase& c : cases) c.inputs[1] = testing::randomArray(DType::f32, c.inputs[1].shape, 6);
      EXPECT_GE(runOnFourReplicas(group, cases), first + kReplicas - 1);
    }
}

TEST(SharedValuesTest, AReplicaWhoseWeightsDifferMakesItsOwn) {
  PinnedKernels pin("conv2d:winograd_4x4");
  std::vector<KernelCase> cases;
  for (int r = 0; r < kReplicas; ++r) cases.push_back(convCase("conv2d", 16, 100 + r, r == 2 ? 9 : 5));
  ReplicaGroup group(oneStepProgram(cases[0], "SharedValuesTest"), parseDeviceList("cpu:4"), Job::single(),
                     std::chrono::seconds(30));
  runOnFourReplicas(group, cases);
  // Every replica differing from every other: none reads another's.
  for (int r = 0; r < kReplicas; ++r) cases[size_t(r)].inputs[1] = testing::randomArray(DType::f32, {16, 16, 3, 3}, 20 + r);
  const int64_t before = group.sharedValues()->reads();
  EXPECT_EQ(runOnFourReplicas(group, cases), before);
}

TEST(SharedValuesTest, PastTheBudgetEveryReplicaMakesItsOwn) {
  SharedValues shared(2, 1024);
  shared.beginCall();
  const std::vector<std::byte> source(64, std::byte{1});
  int made = 0;
  auto make = [&](int64_t first, int64_t last, float* out) { made += int(last - first); };
  EXPECT_EQ(shared.share(0, source, 1024, 4, make), nullptr);  // 4 KiB: past the budget
  EXPECT_EQ(made, 0);
  EXPECT_EQ(shared.bytes(), 0u);
  EXPECT_NE(shared.share(1, source, 16, 4, make), nullptr);  // 64 bytes fit
  EXPECT_EQ(made, 4);
  EXPECT_EQ(shared.bytes(), 64u);
  EXPECT_EQ(shared.share(2, source, 16, 4, make), nullptr);  // no such step
}

TEST(SharedValuesTest, AMakerThatThrowsLeavesTheOthersToMakeTheirOwn) {
  SharedValues shared(1, SharedValues::kBudgetBytes);
  shared.beginCall();
  const std::vector<std::byte> source(64, std::byte{3});
  std::atomic<bool> thrown{false};
  std::atomic<int> nulls{0}, values{0};
  auto make = [&](int64_t first, int64_t, float* out) {
    if (first == 0) {
      thrown = true;
      throw std::runtime_error("part 0 failed");
    }
    while (!thrown) std::this_thread::yield();  // part 0's maker has started
    out[first] = float(first);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kReplicas; ++t)
    threads.emplace_back([&] {
      try {
        (shared.share(0, source, 8, 8, make) ? values : nulls)++;
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "part 0 failed");
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(thrown);
  EXPECT_EQ(values, 0);
  EXPECT_EQ(nulls, kReplicas - 1);
}

}  // namespace
}  // namespace spmd::runtime
