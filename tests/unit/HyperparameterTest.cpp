// Hyperparameters as inputs: a learning-rate schedule passed as a traced scalar runs on one
// compiled step; a number passed as an argument is static (part of the compile key: a new value
// recompiles and the reason names it); AdamW's decoupled weight decay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;

// loss = sum(w * w): the gradient is 2 w.
Tree quadraticGrads(const Tree& p) {
  return value_and_grad([](const Tree& q) { return sum(mul(q.at("w"), q.at("w")), {0}); })(p).second;
}

TEST(HyperparameterTest, ScheduleOverTwentyStepsCompilesOnce) {
  Tree params;
  params.set("w", Array::of<float>({3}, std::vector<float>{1.0f, -2.0f, 0.5f}));
  optim::Sgd sgd({.learningRate = 0.1});
  optim::Schedule schedule = optim::linearWarmup(3, optim::cosineDecay(0.1, 17, 0.01));
  auto step = jit([&](const Tree& p, const Tensor& rate) {
    return sgd.update(p, quadraticGrads(p), Tree(), rate).first;
  });
  // The schedule written out here, not taken from rateAt: 3 warm-up steps to 0.1 (0.1 (t + 1) / 3),
  // then a half cosine from 0.1 to 0.01 over 17 steps.
  auto want = [](int64_t t) {
    if (t < 3) return 0.1 * double(t + 1) / 3.0;
    const double done = double(std::min<int64_t>(t - 3, 17)) / 17.0;
    return 0.01 + 0.09 * 0.5 * (1.0 + std::cos(3.14159265358979323846 * done));
  };
  std::vector<double> expected = {1.0, -2.0, 0.5};
  std::set<double> rates;
  for (int64_t t = 0; t < 20; ++t) {
    Array rate = optim::rateAt(schedule, t);
    const float r = rate.values<float>()[0];
    EXPECT_EQ(r, float(want(t))) << "step " << t;
    rates.insert(r);
    params = step(params, rate);
    for (double& w : expected) w *= 1.0 - 2.0 * double(float(want(t)));
  }
  EXPECT_EQ(step.compileCount(), 1) << step.lastCompileReason();
  EXPECT_GE(rates.size(), 18u) << "the schedule should give a different rate almost every step";
  auto w = params.at("w").array().values<float>();
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(w[i], expected[i], 1e-6 * std::fabs(expected[0]) + 1e-7);
}

TEST(HyperparameterTest, TracedConstantRateGivesTheBitsOfTheConfiguredRate) {
  Tree params;
  params.set("w", spmd::testing::randomArray(DType::f32, {5}, 3));
  for (bool decoupled : {false, true}) {
    optim::Adam adam({.learningRate = 0.01, .weightDecay = 0.05, .decoupledWeightDecay = decoupled});
    auto configured = jit([&](const Tree& p, const Tree& o) { return adam.update(p, quadraticGrads(p), o); });
    auto traced = jit([&](const Tree& p, const Tree& o, const Tensor& rate) {
      return adam.update(p, quadraticGrads(p), o, rate);
    });
    Tree a = params, b = params, oa = adam.init(params), ob = adam.init(params);
    for (int64_t t = 0; t < 3; ++t) {
      std::tie(a, oa) = configured(a, oa);
      std::tie(b, ob) = traced(b, ob, optim::rateAt(optim::constantRate(0.01), t));
    }
    auto x = a.at("w").array().values<float>(), y = b.at("w").array().values<float>();
    EXPECT_EQ(std::vector<float>(x.begin(), x.end()), std::vector<float>(y.begin(), y.end())) << decoupled;
  }
}

TEST(HyperparameterTest, AdamWDecaysTheParameterNotTheGradient) {
  // p = 2, g = 2p = 4, lr 0.01, wd 0.1, first step: m^ = 4, v^ = 16, so the Adam step is
  // 4 / (4 + 1e-8); AdamW: p = 2 - 0.01 * 0.1 * 2 - 0.01 * step = 1.988. Adam with L2 decay
  // adds 0.2 to the gradient, and the normalized first step is again ~1: 2 - 0.01 = 1.99.
  Tree params;
  params.set("w", Array::of<float>({1}, std::vector<float>{2.0f}));
  for (auto [decoupled, want] : {std::pair{true, 1.988}, {false, 1.99}}) {
    optim::Adam adam({.learningRate = 0.01, .weightDecay = 0.1, .decoupledWeightDecay = decoupled});
    auto step = jit([&](const Tree& p, const Tree& o) { return adam.update(p, quadraticGrads(p), o).first; });
    EXPECT_NEAR(step(params, adam.init(params)).at("w").array().values<float>()[0], want, 1e-6) << decoupled;
  }
}

TEST(HyperparameterTest, StaticArgumentsAreInTheCompileKey) {
  auto scaled = jit([](const Tensor& x, double scale, bool negate) {
    Tensor y = mul(x, scale);
    return negate ? neg(y) : y;
  });
  Array x = Array::of<float>({2}, std::vector<float>{1.0f, 2.0f});
  auto values = [](const Tensor& t) {
    auto v = t.array().values<float>();
    return std::vector<float>(v.begin(), v.end());
  };
  EXPECT_EQ(values(scaled(x, 2.0, false)), (std::vector<float>{2, 4}));
  EXPECT_EQ(values(scaled(x, 3.0, false)), (std::vector<float>{3, 6})) << "a new static value must not be ignored";
  EXPECT_EQ(scaled.compileCount(), 2);
  EXPECT_NE(scaled.lastCompileReason().find("static argument 1 was 2, now 3"), std::string::npos)
      << scaled.lastCompileReason();
  EXPECT_EQ(values(scaled(x, 3.0, true)), (std::vector<float>{-3, -6}));
  EXPECT_NE(scaled.lastCompileReason().find("static argument 2 was false, now true"), std::string::npos)
      << scaled.lastCompileReason();
  int before = scaled.compileCount();
  EXPECT_EQ(values(scaled(x, 3.0, true)), (std::vector<float>{-3, -6}));
  EXPECT_EQ(scaled.compileCount(), before) << "the same static values reuse the compiled function";

  // Under pmap a static argument takes any in_axes entry and reaches every replica.
  auto mapped = pmap([](const Tensor& v, double scale) { return mul(v, scale); },
                     {.inAxes = {split, replicated}, .outAxes = {split}, .devices = "cpu:2"});
  EXPECT_EQ(values(mapped(x, 0.5)), (std::vector<float>{0.5f, 1.0f}));
  EXPECT_EQ(values(mapped(x, 4.0)), (std::vector<float>{4, 8}));
  EXPECT_EQ(mapped.compileCount(), 2);
}

TEST(HyperparameterTest, BadRatesAndSchedulesSayWhatIsWrong) {
  Tree params;
  params.set("w", Array::of<float>({2}, std::vector<float>{1.0f, 2.0f}));
  optim::Sgd sgd({.learningRate = 0.1});
  auto step = jit([&](const Tree& p, const Tensor& rate) { return sgd.update(p, quadraticGrads(p), Tree(), rate).first; });
  std::string error = errorOf([&] { step(params, Array::of<float>({2}, std::vector<float>{0.1f, 0.1f})); });
  EXPECT_NE(error.find("the learning rate must be a rank-0 f32 tensor"), std::string::npos) << error;
  EXPECT_NE(error.find("HyperparameterTest.cpp"), std::string::npos) << "the error names the user's line: " << error;
  error = errorOf([&] { optim::rateAt(optim::stepDecay(0.1, 5, 0.5), 0, DType::f64); });
  EXPECT_EQ(error, "no error") << "a valid schedule";
  error = errorOf([&] { optim::rateAt([](int64_t t) { return 0.1 - 0.01 * double(t); }, 12); });
  EXPECT_NE(error.find("at step 12"), std::string::npos) << error;
  error = errorOf([&] { optim::rateAt(optim::constantRate(0.1), -1); });
  EXPECT_NE(error.find("step -1 is negative"), std::string::npos) << error;
  // cosineDecay's default floor is 0, its rate from `steps` on: a rate, as torch.optim's lr = 0.
  EXPECT_EQ(optim::rateAt(optim::cosineDecay(0.1, 10), 10).values<float>()[0], 0.0f);
  EXPECT_FLOAT_EQ(optim::rateAt(optim::cosineDecay(0.1, 10), 5).values<float>()[0], 0.05f);
  error = errorOf([&] { optim::cosineDecay(0.1, 0); });
  EXPECT_NE(error.find("steps must be >= 1"), std::string::npos) << error;
}

}  // namespace
}  // namespace spmd
