// spmd::checkpoint (rematerialization, frontend/Remat.h and passes/Autodiff.cpp): a checkpointed
// step gives the same bits as the plain one (ResNet-18 with every residual block checkpointed,
// under pmap with per-replica BatchNorm, and the transformer block with its attention and MLP
// sublayers checkpointed), recomputes the segments' forward ops in the backward pass (more
// convolution steps in the Program), and its memory plan is smaller.
#include <gtest/gtest.h>

#include <cmath>

#include "TestUtil.h"
#include "TransformerBlock.h"
#include "TreeCompare.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/program/MemoryPlan.h"

namespace spmd {
namespace {

using spmd::testing::firstBitDifference;
using spmd::testing::randomArray;

const optim::SgdConfig kSgd{.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4};

int countSteps(const runtime::Program& program, const std::string& op) {
  int n = 0;
  for (const runtime::Step& step : program.steps) n += step.op == op;
  return n;
}

struct ResNetRun {
  Tree params, state, opt;
  std::vector<float> losses;
  runtime::Program program;
};

ResNetRun trainResNet(bool remat, int64_t width, int64_t batch, int64_t size, int steps, int64_t budget = 0,
                      const std::string& bnAxis = "", bool fsdp = false) {
  auto model = models::resnet18({.width = width, .bnAxisName = bnAxis, .checkpointBlocks = remat});
  auto [params, state] = spmd::testing::kaimingInit(*model, DType::f32);
  Tree opt = optim::Sgd(kSgd).init(params);
  auto f = pmap(
      [&](const Tree& p, const Tree& s, const Tree& o, const Tensor& x, const Tensor& y) {
        auto [loss, grads, newState] = value_and_grad(
            [&](const Tree& q) {
              auto [logits, next] = model->apply(q, s, x, /*training=*/true);
              return std::pair{mean(softmaxCrossEntropy(logits, y), {0}), next};
            },
            has_aux)(p);
        auto [newParams, newOpt] = optim::Sgd(kSgd).update(p, grads, o);
        return std::tuple{newParams, newState, newOpt, loss};
      },
      {.inAxes = {replicated, replicated, replicated, split, split}, .devices = "cpu:2", .fullyShard = fsdp,
       .memoryBudget = budget});
  ResNetRun run;
  for (int i = 0; i < steps; ++i) {
    Array y = Array::zeros(DType::i32, {batch});
    for (int64_t k = 0; k < batch; ++k) y.values<int32_t>()[k] = int32_t((k * 3 + i) % 10);
    auto [p, s, o, loss] = f(params, state, opt, Tensor(randomArray(DType::f32, {batch, 1, size, size}, 50 + i, -1, 1)),
                             Tensor(y));
    params = p, state = s, opt = o;
    run.losses.push_back(loss.array().values<float>()[0]);
  }
  run.params = params, run.state = state, run.opt = opt;
  run.program = f.lastProgram();
  return run;
}

TEST(RematTest, CheckpointedResNetBlocksGiveTheSameBits) {
  ResNetRun plain = trainResNet(false, 4, 8, 16, 3), remat = trainResNet(true, 4, 8, 16, 3);
  EXPECT_EQ(firstBitDifference(remat.params, plain.params), "");
  EXPECT_EQ(firstBitDifference(remat.state, plain.state), "");
  EXPECT_EQ(firstBitDifference(remat.opt, plain.opt), "");
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    EXPECT_TRUE(std::isfinite(plain.losses[i]));
    EXPECT_EQ(std::memcmp(&remat.losses[i], &plain.losses[i], sizeof(float)), 0) << "step " << i + 1;
  }
  // The forward convolutions of the blocks run again in the backward pass: 20 in the plain step
  // (stem, 16 in the blocks, 3 projections); every block's convolutions once more with remat.
  EXPECT_EQ(countSteps(plain.program, "conv2d"), 20);
  EXPECT_EQ(countSteps(remat.program, "conv2d"), 20 + 19);
}

// Cross-replica BatchNorm recomputes its statistics' all-reduces too (the same folds, the same
// bits), and FSDP gathers the parameters again for the recomputed convolutions.
TEST(RematTest, CheckpointedBlocksWithCrossReplicaBatchNormAndFsdpGiveTheSameBits) {
  ResNetRun plain = trainResNet(false, 4, 8, 16, 3, 0, "batch"), remat = trainResNet(true, 4, 8, 16, 3, 0, "batch", true);
  EXPECT_EQ(firstBitDifference(remat.params, plain.params), "");
  EXPECT_EQ(firstBitDifference(remat.state, plain.state), "");
  EXPECT_EQ(firstBitDifference(remat.opt, plain.opt), "");
  EXPECT_EQ(std::memcmp(remat.losses.data(), plain.losses.data(), plain.losses.size() * sizeof(float)), 0);
  EXPECT_EQ(countSteps(remat.program, "conv2d"), 20 + 19);
}

// The plan, not a measurement: at width 16, batch 32 on 28x28 images (activations dominate),
// keeping only the blocks' inputs and outputs shrinks the arena by more than a quarter (measured:
// 15.6 -> 10.9 MB).
TEST(RematTest, CheckpointedBlocksShrinkTheMemoryPlan) {
  ResNetRun plain = trainResNet(false, 16, 32, 28, 1), remat = trainResNet(true, 16, 32, 28, 1);
  std::printf("arena per replica: %.1f MB plain, %.1f MB with every residual block checkpointed\n",
              plain.program.arenaBytes / 1e6, remat.program.arenaBytes / 1e6);
  EXPECT_LT(remat.program.arenaBytes * 4, plain.program.arenaBytes * 3);
}

// A memory budget between the plain plan and the plan with every block recomputed: the compiler
// recomputes some blocks, not all, the plan fits, and the bits are the plain step's.
TEST(RematTest, AMemoryBudgetRecomputesTheFewestLayersThatFit) {
  ResNetRun plain = trainResNet(false, 16, 32, 28, 2), all = trainResNet(true, 16, 32, 28, 1);
  const size_t plainBytes = runtime::residentBytes(plain.program, false),
               allBytes = runtime::residentBytes(all.program, false), budget = (plainBytes + allBytes) / 2;
  ResNetRun fitted = trainResNet(false, 16, 32, 28, 2, int64_t(budget));
  const size_t fittedBytes = runtime::residentBytes(fitted.program, false);
  std::printf("planned per replica: %.1f MB plain, %.1f MB every block recomputed, budget %.1f MB: %.1f MB with "
              "%d of 19 block convolutions run again\n",
              plainBytes / 1e6, allBytes / 1e6, budget / 1e6, fittedBytes / 1e6,
              countSteps(fitted.program, "conv2d") - 20);
  EXPECT_LE(fittedBytes, budget);
  EXPECT_GT(countSteps(fitted.program, "conv2d"), 20);
  EXPECT_LT(countSteps(fitted.program, "conv2d"), 20 + 19);
  EXPECT_EQ(firstBitDifference(fitted.params, plain.params), "");
  EXPECT_EQ(firstBitDifference(fitted.state, plain.state), "");
  EXPECT_EQ(std::memcmp(fitted.losses.data(), plain.losses.data(), plain.losses.size() * sizeof(float)), 0);
}

TEST(RematTest, AnUnreachableMemoryBudgetNamesTheLargestLiveValues) {
  try {
    trainResNet(false, 16, 32, 28, 1, 1 << 20);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* part : {"the memory budget of 1.0 MB per replica cannot be met", "the plan needs",
                             "the largest values are:", "from 'conv2d", "stage", "fullyShard"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
  }
}

TEST(RematTest, CheckpointedTransformerSublayersGiveTheSameBits) {
  const int64_t vocab = 11, dim = 8, hidden = 32, heads = 2, batch = 3, length = 5;
  Tree params = spmd::testing::transformerParams(vocab, dim, hidden, 40);
  Array ids = Array::zeros(DType::i32, {batch, length}), next = Array::zeros(DType::i32, {batch * length});
  for (int64_t i = 0; i < batch * length; ++i) {
    ids.values<int32_t>()[i] = int32_t((i * 7 + 3) % vocab);
    next.values<int32_t>()[i] = int32_t((i * 5 + 1) % vocab);
  }
  auto stepWith = [&](bool remat) {
    return jit([&, remat](const Tree& p, const Tensor& tokens, const Tensor& labels) {
      return value_and_grad([&](const Tree& q) {
        Tensor logits = spmd::testing::transformerLogits(q, tokens, heads, remat);
        return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), labels), {0});
      })(p);
    });
  };
  auto plainStep = stepWith(false), rematStep = stepWith(true);
  auto [plainLoss, plainGrads] = plainStep(params, Tensor(ids), Tensor(next));
  auto [rematLoss, rematGrads] = rematStep(params, Tensor(ids), Tensor(next));
  EXPECT_EQ(firstBitDifference(rematGrads, plainGrads), "");
  EXPECT_EQ(std::memcmp(rematLoss.array().data(), plainLoss.array().data(), sizeof(float)), 0);
  // The attention's and the MLP's matmuls run again in the backward pass.
  EXPECT_GT(countSteps(rematStep.lastProgram(), "matmul"), countSteps(plainStep.lastProgram(), "matmul"));
}

// The error names the line where the checkpointed function was made.
TEST(RematTest, CheckpointOutsideATracedFunctionIsAnErrorAtItsLine) {
  const int line = __LINE__ + 1;
  auto f = checkpoint([](const Tensor& x) { return x; });
  try {
    f(Tensor(Array::zeros(DType::f32, {2})));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("spmd::checkpoint was called outside a traced function"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("RematTest.cpp:" + std::to_string(line)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace spmd
