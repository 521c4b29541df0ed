// A compiled function (jit or pmap) shared by several threads: calls queue, every result is
// right, nothing hangs (each pmap call has collectives, so a mixed-up call would deadlock or
// cross replicas); different functions traced and compiled on several threads at once. Also run
// under ThreadSanitizer and AddressSanitizer in CI.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
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
      // Both replicas' rows depend on the caller and the call, so a result assembled from another
      // call's rows on either replica is wrong (before, replica 1 got the same rows from both).
      float a = float(t * 1000 + i), b = float(t * 5000 + 2 * i + 1);
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

// Different functions whose first calls (tracing and compiling) run on several threads at
// once, then their later calls, again at once: every result is right, and a shape error in one
// thread's trace reaches that thread alone, naming its line. Each trace has its own MLIR
// context; a shared one crashed here about one run in four (MLIR's uniquer unlocked).
TEST(ConcurrencyTest, DifferentFunctionsTraceAndRunOnSeveralThreadsAtOnce) {
  constexpr int kFunctions = 4, kRounds = 6;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<std::function<Tensor(const Tensor&)>> functions;
    for (int k = 0; k < kFunctions; ++k) {
      if (k % 2 == 0)
        functions.push_back(jit([k](const Tensor& x) {
          Tensor h = tanh(mul(x, fill(x, double(k + 1))));
          return sum(exp(h), {0});
        }));
      else
        functions.push_back(pmap([k](const Tensor& x) { return psum(mul(x, fill(x, double(k + 1))), "batch"); },
                                 {.inAxes = {split}, .devices = "cpu:2", .collectiveTimeoutSeconds = 20}));
    }
    auto bad = jit([](const Tensor& x) { return matmul(x, x); });  // [3, 5] x [3, 5]: a shape error
    Array x = testing::randomArray(DType::f32, {8}, round), odd = testing::randomArray(DType::f32, {3, 5}, 1);
    for (bool warm : {false, true}) {
      std::atomic<int> ready{0};
      std::vector<std::future<std::string>> results;
      for (int k = 0; k <= kFunctions; ++k)
        results.push_back(std::async(std::launch::async, [&, k]() -> std::string {
          ready++;
          while (ready.load() < kFunctions + 1) std::this_thread::yield();  // first calls start together
          if (k == kFunctions) return testing::errorOf([&] { bad(odd); });
          Array y = functions[k](x).array();
          float worst = 0;
          for (int64_t i = 0; i < y.numel(); ++i) {
            double want = 0;
            if (k % 2 == 0) {
              for (int64_t j = 0; j < 8; ++j) want += std::exp(std::tanh(double(x.values<float>()[j]) * (k + 1)));
            } else {
              want = (double(x.values<float>()[i]) + x.values<float>()[i + 4]) * (k + 1);
            }
            worst = std::max(worst, float(std::fabs(y.values<float>()[i] - want) / (1 + std::fabs(want))));
          }
          return worst < 1e-5 ? "ok" : "function " + std::to_string(k) + " is off by " + std::to_string(worst);
        }));
      for (int k = 0; k < kFunctions; ++k) EXPECT_EQ(results[k].get(), "ok") << (warm ? "warm" : "cold");
      std::string error = results[kFunctions].get();
      EXPECT_NE(error.find("ConcurrencyTest.cpp"), std::string::npos) << error;
      EXPECT_NE(error.find("matmul"), std::string::npos) << error;
    }
  }
}

}  // namespace
}  // namespace spmd
