// ZeRO-1 (PmapOptions::shardUpdate, passes/ShardUpdate.cpp): each replica updates its 1/N slice
// of the parameters and optimizer state, and the results are the same bits as the replicated
// update, step after step: ResNet-18 at width 2 on 16x16 inputs in f32 with per-replica
// BatchNorm, 5 steps on cpu:2, cpu:3 and cpu:4, SGD (momentum, Nesterov, weight decay) and Adam with a
// scheduled rate, gradient clipping by global norm and a parameter EMA.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "TestUtil.h"
#include "TreeCompare.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/exec/DeviceArray.h"

namespace spmd {
namespace {

using spmd::testing::firstBitDifference;
using spmd::testing::randomArray;

constexpr int64_t kBatch = 12, kSize = 16;
const optim::SgdConfig kSgd{.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4, .nesterov = true};
const optim::AdamConfig kAdam{.learningRate = 1e-3, .weightDecay = 1e-4};

enum class Optimizer { Sgd, AdamClipped };

struct Vars {
  Tree params, state, opt, ema;
  Tensor loss;
};

Vars initialVars(const nn::Module& model, Optimizer kind) {
  auto [params, state] = spmd::testing::kaimingInit(model, DType::f32);
  Tree opt = kind == Optimizer::Sgd ? optim::Sgd(kSgd).init(params) : optim::Adam(kAdam).init(params);
  return {params, state, opt, optim::Ema(0.9).init(params), Tensor()};
}

auto trainStep(const nn::Module& model, Optimizer kind, const std::string& devices, bool shard) {
  return pmap(
      [&model, kind](const Tree& params, const Tree& state, const Tree& opt, const Tree& ema, const Tensor& x,
                     const Tensor& y, const Tensor& rate) {
        auto [loss, grads, newState] = value_and_grad(
            [&](const Tree& p) {
              auto [logits, s] = model.apply(p, state, x, /*training=*/true);
              return std::pair{mean(softmaxCrossEntropy(logits, y), {0}), s};
            },
            has_aux)(params);
        auto [newParams, newOpt] = kind == Optimizer::Sgd
                                       ? optim::Sgd(kSgd).update(params, grads, opt, rate)
                                       : optim::Adam(kAdam).update(params, optim::clipByGlobalNorm(grads, 0.5).grads,
                                                                   opt, rate);
        return std::tuple{newParams, newState, newOpt, optim::Ema(0.9).update(ema, newParams), loss};
      },
      {.inAxes = {replicated, replicated, replicated, replicated, split, split, replicated},
       .devices = devices,
       .donateArguments = {0, 1, 2, 3},
       .shardUpdate = shard});
}

Array images(int step) { return randomArray(DType::f32, {kBatch, 1, kSize, kSize}, 100 + step, -1, 1); }
Array labels(int step) {
  Array y = Array::zeros(DType::i32, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) y.values<int32_t>()[i] = int32_t((i * 7 + step * 3) % 10);
  return y;
}

template <typename Step>
Vars step(Step& f, const Vars& v, int i) {
  const double rate = 0.05 * std::pow(0.8, i);  // a schedule: the rate is an input, not a constant
  auto [params, state, opt, ema, loss] =
      f(v.params, v.state, v.opt, v.ema, Tensor(images(i)), Tensor(labels(i)), Tensor(optim::rateAt([=](int64_t) {
          return rate;
        }, i)));
  return {params, state, opt, ema, loss};
}

// Every tree and the loss of `a` and `b` are the same bits ("" when they are).
std::string difference(const Vars& a, const Vars& b) {
  for (auto [name, x, y] : {std::tuple{"params", &a.params, &b.params}, {"state", &a.state, &b.state},
                            {"optimizer state", &a.opt, &b.opt}, {"ema", &a.ema, &b.ema}})
    if (std::string d = firstBitDifference(*x, *y); !d.empty()) return std::string(name) + " '" + d + "'";
  if (std::memcmp(a.loss.array().data(), b.loss.array().data(), a.loss.array().bytes()) != 0) return "loss";
  return "";
}

void expectSameBitsAsReplicated(Optimizer kind, const std::string& devices, int replicas,
                                const std::string& bnAxis = "") {
  auto model = models::resnet18({.width = 2, .bnAxisName = bnAxis});
  auto replicatedStep = trainStep(*model, kind, devices, false);
  auto shardedStep = trainStep(*model, kind, devices, true);
  Vars plain = initialVars(*model, kind), sharded = plain;
  for (int i = 0; i < 5; ++i) {
    plain = step(replicatedStep, plain, i);
    sharded = step(shardedStep, sharded, i);
    EXPECT_EQ(difference(sharded, plain), "") << devices << ", step " << i + 1;
    ASSERT_TRUE(std::isfinite(plain.loss.array().values<float>()[0]));
  }
  // The state stayed sliced on the devices: each replica holds ceil(numel / N) of every tensor.
  int64_t total = 0, perReplica = 0;
  for (const auto& [name, t] : sharded.opt) {
    const auto& resident = t.resident();
    ASSERT_TRUE(resident) << name;
    if (t.rank() == 0) continue;  // Adam's bias-correction powers stay replicated
    EXPECT_EQ(resident->layout(), runtime::DeviceArray::Layout::Sliced) << name;
    EXPECT_EQ(resident->localShape(), (Shape{(t.numel() + replicas - 1) / replicas})) << name;
    total += t.numel();
    perReplica += resident->localShape()[0];
  }
  EXPECT_LE(perReplica, total / replicas + 4 * int64_t(sharded.opt.size()));
  EXPECT_NE(shardedStep.lastProgramText().find("all_gather"), std::string::npos);
  if (kind == Optimizer::Sgd) {  // clipping reads the whole gradient: Adam's keep their all_reduce
    const std::string text = shardedStep.lastProgramText();
    EXPECT_NE(text.find("reduce_scatter"), std::string::npos);
    EXPECT_EQ(replicatedStep.lastProgramText().find("reduce_scatter"), std::string::npos);
    // The gradients' mean stays a reduce_scatter's reduction, divided by the replicas the job
    // runs: no divisor of N is written into the program (an edited replica count cannot leave a
    // stale one behind).
    std::istringstream lines(text);
    int scatters = 0;
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("  reduce_scatter ", 0) == 0) {
        ++scatters;
        EXPECT_NE(line.find("reduction = \"mean\""), std::string::npos) << line;
      }
    EXPECT_GT(scatters, 0);
  }
}

TEST(ShardUpdateTest, SgdIsTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated(Optimizer::Sgd, "cpu:2", 2);
  expectSameBitsAsReplicated(Optimizer::Sgd, "cpu:3", 3);  // the mean's division by 3 is not exact
  expectSameBitsAsReplicated(Optimizer::Sgd, "cpu:4", 4);
}

// Cross-replica BatchNorm: its statistics' psums are all_reduces too; what is computed from them
// stays whole where the normalization reads it (the running statistics become sliced state).
TEST(ShardUpdateTest, CrossReplicaBatchNormIsTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated(Optimizer::Sgd, "cpu:2", 2, "batch");
}

TEST(ShardUpdateTest, ClippedAdamWithEmaIsTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated(Optimizer::AdamClipped, "cpu:4", 4);
}

// Checkpoints stay layout-free: a run switches between sharded and replicated steps (sliced
// values are gathered where a replicated step reads them, host values sliced where a sharded one
// does) and still gives the replicated run's bits.
TEST(ShardUpdateTest, ARunSwitchesBetweenShardedAndReplicatedSteps) {
  auto model = models::resnet18({.width = 2, .bnAxisName = ""});
  auto replicatedStep = trainStep(*model, Optimizer::Sgd, "cpu:2", false);
  auto shardedStep = trainStep(*model, Optimizer::Sgd, "cpu:2", true);
  Vars plain = initialVars(*model, Optimizer::Sgd), mixed = plain;
  for (int i = 0; i < 4; ++i) {
    plain = step(replicatedStep, plain, i);
    mixed = i % 2 == 0 ? step(shardedStep, mixed, i) : step(replicatedStep, mixed, i);
  }
  EXPECT_EQ(difference(mixed, plain), "");
}

TEST(ShardUpdateTest, UnsupportedCombinationsAreClearErrors) {
  auto f = [](const Tensor& x) { return x; };
  try {
    pmap(f, {.devices = "cpu:2", .accumulate = 2, .shardUpdate = true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shardUpdate (ZeRO-1) with accumulate = 2 is not supported yet"),
              std::string::npos)
        << e.what();
  }
  try {
    pmap(f, {.devices = "cpu:2", .allReplicas = true, .shardUpdate = true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shardUpdate (ZeRO-1) with allReplicas is not supported"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace spmd
