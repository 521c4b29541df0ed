// The optimizers against torch.optim (tests/reference/torch_optim.py): SGD (momentum, Nesterov,
// weight decay), Adam and AdamW with non-default betas, epsilon and weight decay, RMSprop (plain,
// and centered with momentum and weight decay, and with a parameter group of its own momentum and
// no decay), Adagrad (rate decay, an initial accumulator, weight decay), over several
// steps with a different gradient each step, in f64. A single repeated gradient would hide the
// second moment's decay (beta2 0.999 and 0.9999 agree to 2e-6 on it).
#include <cmath>

#include "TestUtil.h"
#include "TorchExchange.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using testing::Exchange;

constexpr int kSteps = 6;
constexpr double kLr = 0.03, kMomentum = 0.7, kBeta1 = 0.8, kBeta2 = 0.95, kEps = 1e-3, kWeightDecay = 0.04;
constexpr double kLrDecay = 0.1, kInitialAccumulator = 0.2, kGroupMomentum = 0.3;  // Adagrad's, RMSprop's group's

template <typename Optimizer>
Tree run(const Optimizer& optimizer, Tree params, const std::vector<Tree>& grads) {
  auto step = jit([&](const Tree& p, const Tree& g, const Tree& s) { return optimizer.update(p, g, s); });
  Tree state = optimizer.init(params);
  for (const Tree& g : grads) {
    auto [p, s] = step(params, g, state);
    params = p, state = s;
  }
  EXPECT_EQ(step.compileCount(), 1);
  return params;
}

TEST(OptimizerTorchTest, SgdAdamAdamWRmsPropAndAdagradMatchTorchOptimOverChangingGradients) {
  if (std::string why = testing::torchMissing(); !why.empty()) GTEST_FAIL() << why;
  Tree params;
  params.set("a", testing::randomArray(DType::f64, {3, 4}, 1));
  params.set("b", testing::randomArray(DType::f64, {5}, 2, -2, 2));
  // Gradients that change in size and sign from step to step, so that both moments move.
  std::vector<Tree> grads(kSteps);
  Exchange exchange;
  for (const auto& [name, p] : params) exchange.write("param." + name, p.array());
  for (int t = 0; t < kSteps; ++t)
    for (const auto& [name, p] : params) {
      double scale = t % 2 ? 0.05 : 3.0;
      Array g = testing::randomArray(DType::f64, p.shape(), 100 + 10 * t + name.size() + (name == "b"), -scale, scale);
      grads[t].set(name, g);
      exchange.write("grad." + std::to_string(t) + "." + name, g);
    }
  exchange.close();
  char numbers[256];
  std::snprintf(numbers, sizeof numbers, " %d %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g %.17g", kSteps, kLr,
                kMomentum, kBeta1, kBeta2, kEps, kWeightDecay, kLrDecay, kInitialAccumulator, kGroupMomentum);
  std::string command = testing::python() + " " SPMD_SOURCE_DIR "/tests/reference/torch_optim.py " + exchange.dir() + numbers;
  ASSERT_EQ(std::system(command.c_str()), 0) << "failed: " << command;

  std::map<std::string, Tree> ours;
  ours["sgd"] = run(optim::Sgd({.learningRate = kLr, .momentum = kMomentum, .weightDecay = kWeightDecay, .nesterov = true}),
                    params, grads);
  optim::AdamConfig adam{.learningRate = kLr, .beta1 = kBeta1, .beta2 = kBeta2, .epsilon = kEps, .weightDecay = kWeightDecay};
  ours["adam"] = run(optim::Adam(adam), params, grads);
  adam.decoupledWeightDecay = true;
  ours["adamw"] = run(optim::Adam(adam), params, grads);
  // RMSprop's alpha is beta2's value.
  ours["rmsprop"] = run(optim::RmsProp({.learningRate = kLr, .alpha = kBeta2, .epsilon = kEps}), params, grads);
  ours["rmsprop_centered"] = run(optim::RmsProp({.learningRate = kLr, .alpha = kBeta2, .epsilon = kEps,
                                                 .weightDecay = kWeightDecay, .momentum = kMomentum, .centered = true}),
                                 params, grads);
  ours["rmsprop_groups"] = run(optim::RmsProp({.learningRate = kLr, .alpha = kBeta2, .epsilon = kEps,
                                               .weightDecay = kWeightDecay, .momentum = kMomentum,
                                               .groups = {{.match = {"b"}, .weightDecay = 0.0, .momentum = kGroupMomentum}}}),
                               params, grads);
  ours["adagrad"] = run(optim::Adagrad({.learningRate = kLr, .lrDecay = kLrDecay, .weightDecay = kWeightDecay,
                                        .initialAccumulatorValue = kInitialAccumulator, .epsilon = kEps}),
                        params, grads);
  for (const auto& [which, result] : ours)
    for (const auto& [name, p] : result) {
      Array torch = exchange.read(which + "." + name, p.shape(), DType::f64);
      double distance = 0;  // how far torch moved the parameter: the scale of the check
      for (int64_t i = 0; i < torch.numel(); ++i)
        distance = std::max(distance, std::fabs(torch.values<double>()[i] - params.at(name).array().values<double>()[i]));
      ASSERT_GT(distance, 1e-3) << which << "." << name << " hardly moved: the check would be weak";
      testing::expectClose(p.array(), torch, 1e-13, 1e-14 * distance, which + "." + name);
    }
}

}  // namespace
}  // namespace spmd
