// No example dropped (data::Prefetcher's padded batches, nn::ApplyOptions::mask): a batch padded
// to the compiled shape with masked rows trains as the unpadded batch, and an epoch whose batches
// do not split over the devices gives one device's result. ResNet-18 at width 2 on 16x16 inputs
// in f64, SGD with momentum; the loss is sum(cross-entropy * mask) * parts / examples
// (data::Batch::lossScale), so its mean over the replicas is the mean over the examples.
// Tolerance: TreeCompare.h's treeError.
#include <gtest/gtest.h>

#include <cstring>

#include "TestUtil.h"
#include "TreeCompare.h"
#include "frontend/data/Loader.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::randomArray;
using spmd::testing::valueAt;

const optim::SgdConfig kSgd{.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4};
constexpr int64_t kSize = 16;

using spmd::testing::firstBitDifference;
using spmd::testing::treeError;

struct Vars {
  Tree params, state, opt;
};

Vars initialVars(const nn::Module& model) {
  auto [params, state] = spmd::testing::kaimingInit(model, DType::f64);
  return {params, state, optim::Sgd(kSgd).init(params)};
}

// The masked training step: SGD on the examples' mean loss, BatchNorm statistics over examples.
auto maskedStep(const nn::Module& model, const std::string& devices, int accumulate = 1) {
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
      {.inAxes = {replicated, replicated, replicated, split, split, split, replicated}, .devices = devices,
       .accumulate = accumulate});
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

// 1000 f64 16x16 images, the labels a function of the index: 15 batches of 64 and one of 40.
data::Dataset thousandImages(uint64_t seed, int32_t labelStep, int32_t labelOffset) {
  const int64_t n = 1000;
  Array images = randomArray(DType::f64, {n, 1, kSize, kSize}, seed, -1, 1), labels = Array::zeros(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) labels.values<int32_t>()[i] = int32_t((i * labelStep + labelOffset) % 10);
  return data::Dataset(images, labels);
}

struct Epoch {
  Vars vars;
  std::vector<double> losses;
  int64_t seen = 0, compiles = 0;
};

// One epoch of `set` at global batch 64 through the masked step on cpu:`devices` with
// `accumulate` micro-batches, the loader dealing each batch to devices x accumulate parts.
Epoch trainEpoch(const nn::Module& model, const data::Dataset& set, uint64_t seed, int devices, int accumulate) {
  const int64_t batch = 64;
  auto step = maskedStep(model, "cpu:" + std::to_string(devices), accumulate);
  Epoch e{initialVars(model), {}, 0, 0};
  data::Prefetcher loader(set, batch, seed, /*epoch=*/0, 0, 2, data::layoutOfProcess(batch, 0, 1, devices * accumulate));
  while (auto b = loader.next()) {
    auto [p, s, o, loss] = step(e.vars.params, e.vars.state, e.vars.opt, b->images(), b->labels(), b->mask,
                                scalar(b->lossScale()));
    e.vars = {p, s, o};
    e.losses.push_back(valueAt(loss.array(), 0));
    e.seen += b->examples;
  }
  e.compiles = step.compileCount();
  return e;
}

// An epoch of 1000 examples at global batch 64 (15 full batches and one of 40), cross-replica
// BatchNorm: on cpu:3 each batch is dealt 22 + 21 + 21 (the last 14 + 13 + 13) and padded to 22
// rows per device; on cpu:1 it is one part of 64 rows (the last padded from 40). The two runs see
// the same examples in the same steps and agree to 1e-10 after the epoch.
TEST(PaddedBatchTest, AnEpochOnThreeDevicesIsTheEpochOnOne) {
  auto model = models::resnet18({.width = 2, .bnAxisName = "batch"});
  const data::Dataset set = thousandImages(43, 13, 5);
  const Epoch oneDevice = trainEpoch(*model, set, /*seed=*/3, 1, 1), threeDevices = trainEpoch(*model, set, 3, 3, 1);
  for (const Epoch* e : {&oneDevice, &threeDevices}) {
    EXPECT_EQ(e->seen, 1000);
    EXPECT_EQ(e->losses.size(), 16u);
    EXPECT_EQ(e->compiles, 1) << "the padded last batch must not compile again";
  }
  const Vars &one = oneDevice.vars, &three = threeDevices.vars;
  const std::vector<double> &lossesOne = oneDevice.losses, &lossesThree = threeDevices.losses;
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

// Gradient accumulation deals the padding to its micro-batches as more devices would: with
// per-replica BatchNorm, 2 devices x 2 micro-batches give the same bits as 4 devices over the
// same padded epoch (1000 examples at batch 64: parts of 16 rows, the last batch's 40 examples
// 10 each).
TEST(PaddedBatchTest, AccumulationOverPaddedBatchesIsTheSameBitsAsMoreDevices) {
  auto model = models::resnet18({.width = 2, .bnAxisName = ""});
  const data::Dataset set = thousandImages(47, 3, 1);
  const Vars four = trainEpoch(*model, set, /*seed=*/5, 4, 1).vars, twoByTwo = trainEpoch(*model, set, 5, 2, 2).vars;
  EXPECT_EQ(firstBitDifference(twoByTwo.params, four.params), "") << "parameter differs";
  EXPECT_EQ(firstBitDifference(twoByTwo.state, four.state), "") << "BatchNorm state differs";
  EXPECT_EQ(firstBitDifference(twoByTwo.opt, four.opt), "") << "momentum differs";
  EXPECT_GT(treeError(four.params, initialVars(*model).params), 1e-3) << "the epoch must move the parameters";
}

// Bad masks and layouts say what is wrong, where (the caller's line) and what fits.
TEST(PaddedBatchTest, BadMasksAndLayoutsAreClearErrors) {
  auto model = models::resnet18({.width = 2, .bnAxisName = ""});
  const Vars v = initialVars(*model);
  auto step = jit([&](const Tree& params, const Tree& state, const Tensor& x, const Tensor& mask) {
    return model->apply(params, state, x, {.training = true, .rng = {}, .mask = mask}).first;
  });
  const Array x = randomArray(DType::f64, {4, 1, kSize, kSize}, 3);
  const std::string error = testing::errorOf([&] { step(v.params, v.state, x, Array::zeros(DType::f32, {5})); });
  EXPECT_NE(error.find("PaddedBatchTest.cpp:"), std::string::npos) << error;
  EXPECT_NE(error.find("apply: the mask must be [N] with one entry per example of the input f64[4, 1, 16, 16], got f32[5]"),
            std::string::npos) << error;
  const data::Dataset set(randomArray(DType::f32, {10, 2}, 4), Array::zeros(DType::i32, {10}));
  EXPECT_EQ(testing::errorOf([&] { data::Prefetcher(set, 4, 0, 0, 0, 2, {.parts = 0}); }),
            "a batch needs at least one part, got 0");
  EXPECT_EQ(testing::errorOf([&] { data::Prefetcher(set, 4, 0, 0, 0, 2, {.parts = 2, .partRows = 1}); }),
            "2 parts of 1 rows cannot hold a batch of 4");
  EXPECT_EQ(testing::errorOf([&] { data::Prefetcher(set, 4, 0, 0, 0, 2, {.parts = 2, .firstPart = 2, .lastPart = 2}); }),
            "parts [2, 2) are not parts of a batch in 2");
}

}  // namespace
}  // namespace spmd
