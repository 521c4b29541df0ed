// A compiled function (jit or pmap) shared by several threads: calls queue, every result is
// right, nothing hangs (each pmap call has collectives, so a mixed-up call would deadlock or
// cross replicas). Also run under ThreadSanitizer in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

constexpr int kThreads = 4, kCalls = 150;

TEST(ConcurrencyTest, OneJitFunctionFromSeveralThreadsGivesEveryCallItsOwnResult) {
  auto f = jit([](const Tensor& x) { return relu(add(mul(x, fill(x, 2.0)), fill(x, 1.0))); });
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        float v = float(t * 1000 + i);
        Array x = Array::of<float>({64}, std::vector<float>(64, v));
        Array y = f(x).array();
        for (float r : y.values<float>()) wrong += r != 2 * v + 1;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.compileCount(), 1);
}

TEST(ConcurrencyTest, OnePmapStepFromTwoThreadsNeverHangsAndIsRight) {
  auto step = pmap([](const Tensor& x) { return psum(x, "batch"); },
                   {.inAxes = {split}, .outAxes = {replicated}, .devices = "cpu:2",
                    .collectiveTimeoutSeconds = 20});
  auto worker = [&](int t) {
    int wrong = 0;
    for (int i = 0; i < kCalls; ++i) {
      float a = float(t * 1000 + i), b = float(i);
      std::vector<float> values(8, a);
      std::fill(values.begin() + 4, values.end(), b);
      Array out = step(Array::of<float>({8}, values)).array();
      for (float r : out.values<float>()) wrong += r != a + b;
    }
    return wrong;
  };
  // Two callers on one compiled step, with a deadline: a hang fails the test instead of CI.
  auto one = std::async(std::launch::async, worker, 1);
  auto two = std::async(std::launch::async, worker, 2);
  ASSERT_EQ(one.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "deadlock";
  ASSERT_EQ(two.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "deadlock";
  EXPECT_EQ(one.get(), 0);
  EXPECT_EQ(two.get(), 0);
}

}  // namespace
}  // namespace spmd
