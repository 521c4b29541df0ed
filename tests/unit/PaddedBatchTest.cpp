// No example dropped (data::Prefetcher's padded batches, nn::ApplyOptions::mask): a batch padded
// to the compiled shape with masked rows trains as the unpadded batch, and an epoch whose batches
// do not split over the devices gives one device's result. ResNet-18 at width 2 on 16x16 inputs
// in f64, SGD with momentum; the loss is sum(cross-entropy * mask) * parts / examples
// (data::Batch::lossScale), so its mean over the replicas is the mean over the examples.
// Tolerance per tensor: max|a - b| / max(max|b|, 1e-2 * max|b| over its tree), with conv biases
// (which feed BatchNorms: true gradient zero) on the tree's scale.
#include <gtest/gtest.h>

#include <cstring>

#include "TestUtil.h"
#include "frontend/data/Loader.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::randomArray;
using spmd::testing::valueAt;

const optim::SgdConfig kSgd{.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4};
constexpr int64_t kSize = 16;

Tree mapTree(const Tree& tree, const std::function<Array(const std::string&, const Array&)>& fn) {
  Tree out;
  for (const auto& [name, t] : tree) out.set(name, fn(name, t.array()));
  return out;
}

struct Vars {
  Tree params, state, opt;
};

// f64 parameters at Kaiming scale, so every layer carries signal and gradient.
Vars initialVars(const nn::Module& model) {
  auto [params, state] = model.initialize(7);
  params = mapTree(params, [&](const std::string& name, const Array& a) {
    const bool weight = name.find("weight") != std::string::npos && a.shape.size() > 1;
    const int64_t fanIn = weight ? a.numel() / a.shape[0] : 1;
    Array r = randomArray(DType::f64, a.shape, std::hash<std::string>()(name), -1, 1);
    for (double& v : r.values<double>()) v *= weight ? std::sqrt(3.0 / double(fanIn)) : 0.1;
    return r;
  });
  state = mapTree(state, [](const std::string&, const Array& a) { return spmd::testing::convertArray(a, DType::f64); });
  return {params, state, optim::Sgd(kSgd).init(params)};
}

double maxAbs(const Array& a) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(valueAt(a, i)));
  return m;
}

double treeError(const Tree& actual, const Tree& expected) {
  double treeMax = 0, worst = 0;
  for (const auto& [name, t] : expected) treeMax = std::max(treeMax, maxAbs(t.array()));
  for (const auto& [name, t] : expected) {
    const Array &b = t.array(), &a = actual.at(name).array();
    double diff = 0;
    for (int64_t i = 0; i < b.numel(); ++i) diff = std::max(diff, std::abs(valueAt(a, i) - valueAt(b, i)));
    const bool zeroGradient = name.find("conv") != std::string::npos && name.ends_with(".bias");
    worst = std::max(worst, diff / (zeroGradient ? treeMax : std::max(maxAbs(b), 1e-2 * treeMax)));
  }
  return worst;
}

// The masked training step: SGD on the examples' mean loss, BatchNorm statistics over examples.
auto maskedStep(const nn::Module& model, const std::string& devices) {
  return pmap(
      [&model](const Tree& params, const Tree& state, const Tree& opt, const Tensor& x, const Tensor& y,
               const Tensor& mask, const Tensor& scale) {
        auto [loss, grads, newState] = value_and_grad(
            [&](const Tree& p) {
              auto [logits, s] = model.apply(p, state, x, {.training = true, .rng = {}, .mask = mask});
              Tensor losses = mul(softmaxCrossEntropy(logits, y), cast(mask, logits.dtype()));
              return std::pair{mul(sum(losses, {0}), scale), s};
            },
            has_aux)(params);
        auto [newParams, newOpt] = optim::Sgd(kSgd).update(params, grads, opt);
        return std::tuple{newParams, newState, newOpt, loss};
      },
      {.inAxes = {replicated, replicated, replicated, split, split, split, replicated}, .devices = devices});
}

Array scalar(double v) { return Array::of<double>({}, std::vector<double>{v}); }

// One step on 13 examples, unpadded (no mask, mean loss) and padded to 16 rows whose 3 padding
// rows hold other images and labels: the new parameters, BatchNorm statistics, momentum and loss
// agree to 1e-12.
TEST(PaddedBatchTest, APaddedStepIsTheUnpaddedStep) {
  auto model = models::resnet18({.width = 2, .bnAxisName = ""});
  const Vars start = initialVars(*model);
  const int64_t examples = 13, rows = 16;
  Array x = randomArray(DType::f64, {rows, 1, kSize, kSize}, 41, -1, 1), y = Array::zeros(DType::i32, {rows});
  for (int64_t i = 0; i < rows; ++i) y.values<int32_t>()[i] = int32_t((i * 7 + 3) % 10);
  Array xReal = Array::view(x, 0, {examples, 1, kSize, kSize}), yReal = Array::view(y, 0, {examples});
  auto unpadded = pmap(
      [&](const Tree& params, const Tree& state, const Tree& opt, const Tensor& xs, const Tensor& ys) {
        auto [loss, grads, newState] = value_and_grad(
            [&](const Tree& p) {
              auto [logits, s] = model->apply(p, state, xs, /*training=*/true);
              return std::pair{mean(softmaxCrossEntropy(logits, ys), {0}), s};
            },
            has_aux)(params);
        auto [newParams, newOpt] = optim::Sgd(kSgd).update(params, grads, opt);
        return std::tuple{newParams, newState, newOpt, loss};
      },
      {.inAxes = {replicated, replicated, replicated, split, split}, .devices = "cpu:1"});
  auto [p1, s1, o1, l1] = unpadded(start.params, start.state, start.opt, xReal, yReal);
  Array mask = Array::zeros(DType::f64, {rows});
  for (int64_t i = 0; i < examples; ++i) mask.values<double>()[i] = 1.0;
  auto padded = maskedStep(*model, "cpu:1");
  auto [p2, s2, o2, l2] = padded(start.params, start.state, start.opt, x, y, mask, scalar(1.0 / examples));
  const double params = treeError(p2, p1), state = treeError(s2, s1), opt = treeError(o2, o1);
  const double loss = std::abs(valueAt(l2.array(), 0) - valueAt(l1.array(), 0)) / std::abs(valueAt(l1.array(), 0));
  std::printf("  padded (13 of 16 rows) vs unpadded step, f64: params %.2e, BN state %.2e, momentum %.2e, loss %.2e\n",
              params, state, opt, loss);
  EXPECT_LE(params, 1e-12);
  EXPECT_LE(state, 1e-12);
  EXPECT_LE(opt, 1e-12);
  EXPECT_LE(loss, 1e-12);
  // The padding rows' contents must not matter: the step really moved the parameters, and a
  // step that counted the padding would differ.
  EXPECT_GT(treeError(p2, start.params), 1e-4);
  auto [p3, s3, o3, l3] = padded(start.params, start.state, start.opt, x, y, Array::of<double>({rows}, std::vector<double>(rows, 1.0)),
                                 scalar(1.0 / rows));
  EXPECT_GT(treeError(p3, p1), 1e-6) << "with every row counted the step must differ";
}

// An epoch of 1000 examples at global batch 64 (15 full batches and one of 40), cross-replica
// BatchNorm: on cpu:3 each batch is dealt 22 + 21 + 21 (the last 14 + 13 + 13) and padded to 22
// rows per device; on cpu:1 it is one part of 64 rows (the last padded from 40). The two runs see
// the same examples in the same steps and agree to 1e-10 after the epoch.
TEST(PaddedBatchTest, AnEpochOnThreeDevicesIsTheEpochOnOne) {
  auto model = models::resnet18({.width = 2, .bnAxisName = "batch"});
  const int64_t n = 1000, batch = 64;
  Array images = randomArray(DType::f64, {n, 1, kSize, kSize}, 43, -1, 1), labels = Array::zeros(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) labels.values<int32_t>()[i] = int32_t((i * 13 + 5) % 10);
  const data::Dataset set(images, labels);
  auto epoch = [&](int devices) {
    auto step = maskedStep(*model, "cpu:" + std::to_string(devices));
    Vars v = initialVars(*model);
    data::Prefetcher loader(set, batch, /*seed=*/3, /*epoch=*/0, 0, 2, data::layoutOfProcess(batch, 0, 1, devices));
    int64_t seen = 0, steps = 0;
    std::vector<double> losses;
    while (auto b = loader.next()) {
      auto [p, s, o, loss] = step(v.params, v.state, v.opt, b->images(), b->labels(), b->mask, scalar(b->lossScale()));
      v = {p, s, o};
      losses.push_back(valueAt(loss.array(), 0));
      seen += b->examples, ++steps;
    }
    EXPECT_EQ(seen, n);
    EXPECT_EQ(steps, 16);
    EXPECT_EQ(step.compileCount(), 1) << "the padded last batch must not compile again";
    return std::pair{v, losses};
  };
  auto [one, lossesOne] = epoch(1);
  auto [three, lossesThree] = epoch(3);
  const double params = treeError(three.params, one.params), state = treeError(three.state, one.state),
               opt = treeError(three.opt, one.opt);
  double loss = 0;
  for (size_t s = 0; s < lossesOne.size(); ++s) loss = std::max(loss, std::abs(lossesThree[s] - lossesOne[s]) / std::abs(lossesOne[s]));
  std::printf("  epoch of 1000 at batch 64, cpu:3 vs cpu:1, f64: params %.2e, BN state %.2e, momentum %.2e, loss %.2e\n",
              params, state, opt, loss);
  EXPECT_LE(params, 1e-10);
  EXPECT_LE(state, 1e-10);
  EXPECT_LE(opt, 1e-10);
  EXPECT_LE(loss, 1e-10);
}

}  // namespace
}  // namespace spmd
