// The optimizer utilities against PyTorch's formulas (tests/reference/torch_optim_utils.py), in
// f64: clipByGlobalNorm against torch.nn.utils.clip_grad_norm_ (a tree over the limit and one
// under it); parameter groups (no decay on biases and BatchNorm, a head at a quarter of the rate
// with its own momentum) in SGD, Adam and AdamW under a step-decay schedule against
// torch.optim's param_groups, 20 steps on one compiled step; Ema against
// torch.optim.swa_utils.AveragedModel. Plus the errors a typo in a group or a bad value gets.
#include <cmath>

#include "TestUtil.h"
#include "TorchExchange.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using testing::Exchange;

constexpr int kSteps = 20;
constexpr double kMaxNorm = 1.5, kLr = 0.05, kMomentum = 0.9, kWeightDecay = 0.03, kDecay = 0.8;

const std::vector<optim::ParamGroup> kGroups = {
    {.match = {"*.bias", "bn*"}, .weightDecay = 0.0},
    {.match = {"head.*"}, .learningRate = kLr / 4, .momentum = 0.5},
};

Tree someParams() {
  Tree params;
  params.set("conv.weight", testing::randomArray(DType::f64, {4, 3}, 1));
  params.set("conv.bias", testing::randomArray(DType::f64, {4}, 2));
  params.set("bn1.weight", testing::randomArray(DType::f64, {4}, 3, 0.5, 1.5));
  params.set("head.weight", testing::randomArray(DType::f64, {2, 4}, 4));
  params.set("head.bias", testing::randomArray(DType::f64, {2}, 5));
  return params;
}

template <typename Optimizer>
Tree train(const Optimizer& optimizer, Tree params, const std::vector<Tree>& grads) {
  const optim::Schedule schedule = optim::stepDecay(kLr, 4, 0.5);
  auto step = jit([&](const Tree& p, const Tree& g, const Tree& s, const Tensor& rate) {
    return optimizer.update(p, g, s, rate);
  });
  Tree state = optimizer.init(params);
  for (int t = 0; t < kSteps; ++t) {
    auto [p, s] = step(params, grads[t], state, Tensor(optim::rateAt(schedule, t, DType::f64)));
    params = p, state = s;
  }
  EXPECT_EQ(step.compileCount(), 1) << "a schedule and parameter groups must not recompile";
  return params;
}

TEST(OptimUtilsTorchTest, ClipGroupsAndEmaMatchPyTorch) {
  if (std::string why = testing::torchMissing(); !why.empty()) GTEST_FAIL() << why;
  const Tree params = someParams();
  Exchange exchange;
  // Clipping: "over" has a norm well above kMaxNorm, "under" below it (left as it is).
  std::map<std::string, Tree> clipCases;
  for (const auto& [name, p] : params) {
    clipCases["over"].set(name, testing::randomArray(DType::f64, p.shape(), 20 + name.size(), -2, 2));
    clipCases["under"].set(name, testing::randomArray(DType::f64, p.shape(), 40 + name.size(), -0.1, 0.1));
  }
  for (const auto& [which, grads] : clipCases)
    for (const auto& [name, g] : grads) exchange.write("clip." + which + "." + name, g.array());
  // Groups: gradients that change in size and sign from step to step.
  std::vector<Tree> grads(kSteps);
  for (const auto& [name, p] : params) exchange.write("param." + name, p.array());
  for (int t = 0; t < kSteps; ++t)
    for (const auto& [name, p] : params) {
      double scale = t % 2 ? 0.2 : 2.0;
      Array g = testing::randomArray(DType::f64, p.shape(), 100 + 10 * t + name.size(), -scale, scale);
      grads[t].set(name, g);
      exchange.write("grad." + std::to_string(t) + "." + name, g);
    }
  // EMA: the parameters after each of 6 steps.
  std::vector<Tree> trajectory(6);
  for (int t = 0; t < 6; ++t)
    for (const auto& [name, p] : params) {
      Array v = testing::randomArray(DType::f64, p.shape(), 500 + 7 * t + name.size(), -1, 1);
      trajectory[t].set(name, v);
      exchange.write("ema_param." + std::to_string(t) + "." + name, v);
    }
  exchange.close();
  char numbers[256];
  std::snprintf(numbers, sizeof numbers, " %.17g %d %.17g %.17g %.17g %.17g", kMaxNorm, kSteps, kLr, kMomentum,
                kWeightDecay, kDecay);
  std::string command =
      testing::python() + " " SPMD_SOURCE_DIR "/tests/reference/torch_optim_utils.py " + exchange.dir() + numbers;
  ASSERT_EQ(std::system(command.c_str()), 0) << "failed: " << command;

  auto clip = jit([](const Tree& g) {
    optim::Clipped c = optim::clipByGlobalNorm(g, kMaxNorm);
    Tree out = c.grads;
    out.set("norm", c.norm);
    return out;
  });
  for (const auto& [which, g] : clipCases) {
    Tree ours = clip(g);
    Array norm = exchange.read("norm." + which, {}, DType::f64);
    testing::expectClose(ours.at("norm").array(), norm, 1e-14, 0, "norm." + which);
    ASSERT_TRUE(which == "over" ? norm.values<double>()[0] > 2 * kMaxNorm : norm.values<double>()[0] < kMaxNorm)
        << which << ": the case does not test what it says";
    for (const auto& [name, value] : g)
      testing::expectClose(ours.at(name).array(), exchange.read("clipped." + which + "." + name, value.shape(), DType::f64),
                           1e-14, 1e-16, "clipped." + which + "." + name);
  }

  std::map<std::string, Tree> ours;
  ours["sgd"] = train(optim::Sgd({.learningRate = kLr, .momentum = kMomentum, .weightDecay = kWeightDecay,
                                  .groups = kGroups}),
                      params, grads);
  optim::AdamConfig adam{.learningRate = kLr, .weightDecay = kWeightDecay,
                         .groups = {kGroups[0], {.match = {"head.*"}, .learningRate = kLr / 4}}};
  ours["adam"] = train(optim::Adam(adam), params, grads);
  adam.decoupledWeightDecay = true;
  ours["adamw"] = train(optim::Adam(adam), params, grads);
  // Without the groups every optimizer lands elsewhere: the groups change the result.
  Tree plain = train(optim::Sgd({.learningRate = kLr, .momentum = kMomentum, .weightDecay = kWeightDecay}),
                     params, grads);
  for (const auto& [which, result] : ours)
    for (const auto& [name, p] : result) {
      Array torch = exchange.read(which + "." + name, p.shape(), DType::f64);
      testing::expectClose(p.array(), torch, 1e-12, 1e-14, which + "." + name);
    }
  for (const char* name : {"conv.bias", "head.weight"}) {
    double gap = 0;
    for (int64_t i = 0; i < plain.at(name).array().numel(); ++i)
      gap = std::max(gap, std::fabs(plain.at(name).array().values<double>()[i] -
                                    ours["sgd"].at(name).array().values<double>()[i]));
    EXPECT_GT(gap, 1e-3) << name << ": its group changed nothing";
  }

  optim::Ema ema(kDecay);
  auto average = jit([&](const Tree& s, const Tree& p) { return ema.update(s, p); });
  Tree state = ema.init(params);
  for (const Tree& p : trajectory) state = average(state, p);
  EXPECT_EQ(average.compileCount(), 1);
  Tree weights = optim::Ema::weights(state);
  EXPECT_FALSE(weights.contains(optim::Ema::kCount));
  for (const auto& [name, p] : weights)
    testing::expectClose(p.array(), exchange.read("ema." + name, p.shape(), DType::f64), 1e-14, 1e-15, "ema." + name);
}

void expectHas(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
}

TEST(OptimUtilsTorchTest, BadGroupsAndValuesAreClearErrors) {
  auto message = [](auto make) {
    try {
      make();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  expectHas(message([] { optim::Sgd({.groups = {{.weightDecay = 0.0}}}); }), "optim::Sgd: parameter group 0 {} has no patterns");
  expectHas(message([] { optim::Sgd({.groups = {{.match = {"*"}, .learningRate = -1.0}}}); }), "learningRate must be positive, got -1");
  expectHas(message([] { optim::Adam({.groups = {{.match = {"*.bias"}, .momentum = 0.5}}}); }), "sets momentum, which optim::Adam does not have");
  expectHas(message([] { optim::Ema(1.0); }), "decay must be in [0, 1), got 1");
  // A group whose patterns match nothing (a typo) is refused where the update is traced.
  const Tree params = someParams();
  optim::Sgd sgd({.learningRate = 0.1, .groups = {{.match = {"*.biass"}, .weightDecay = 0.0}}});
  auto step = jit([&](const Tree& p) { return sgd.update(p, p, sgd.init(p)).first; });
  expectHas(message([&] { step(params); }), "parameter group 0 {\"*.biass\"} matches no parameter (paths look like");
  auto clip = jit([](const Tree& g) { return optim::clipByGlobalNorm(g, 0.0).grads; });
  expectHas(message([&] { clip(params); }), "maxNorm must be positive and finite, got 0");
}

}  // namespace
}  // namespace spmd
