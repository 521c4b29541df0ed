// Blocked layouts (passes/AssignLayouts, runtime/program/Layouts.h) change where values lie in
// memory, not what they are: a ResNet-18 training step compiled with the CPU backend's blocked
// layouts equals the same step with every tensor plain. The convolutions run the same oneDNN
// primitives either way (their reorders only move); BatchNorm runs oneDNN's blocked kernels, which
// sum in another order, and its statistics are summed in double (runtime/cpu/Norm.cpp) (measured:
// 3.2e-6 relative on any tensor with a nonzero gradient after one step, AMD EPYC AVX2), hence a
// tolerance of 1e-4 relative to each tree's largest entry.
#include <gtest/gtest.h>

#include <map>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/Driver.h"

namespace spmd {
namespace {

double maxAbs(const Array& a) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(spmd::testing::valueAt(a, i)));
  return m;
}

// max |a - b| / max(max |b|, floor)
double relativeError(const Array& a, const Array& b, double floor) {
  double diff = 0;
  for (int64_t i = 0; i < b.numel(); ++i)
    diff = std::max(diff, std::abs(spmd::testing::valueAt(a, i) - spmd::testing::valueAt(b, i)));
  return diff / std::max({maxAbs(b), floor, 1e-30});
}

// f32 steps in two layouts round differently, and a ReLU whose input lies within that rounding
// of zero flips: every gradient upstream of it then moves by up to ~5e-2 (measured on an AVX-512
// Zen machine, seed 3, batch 6: one flip moved 93 tensors; batches 7, 8, 10 and seeds 4-7 agree to
// 4e-6). So the step is compared on three draws, and a tensor fails when it is off in two of
// them: a layout bug is off in every draw, a flipped tie in one.
TEST(LayoutTest, BlockedStepEqualsThePlainStep) {
  const int64_t block = runtime::CpuDevice().channelBlock();
  if (block == 0) GTEST_SKIP() << "oneDNN picks plain layouts on this CPU: nothing to compare";
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 16});
  optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  auto blocked = jit(bench::trainStep(*model, sgd), {.name = "blocked"});
  auto plain = jit(bench::trainStep(*model, sgd), {.name = "plain", .assignLayouts = false});
  auto [x, y] = bench::syntheticBatch(6);
  std::map<std::string, int> offIn;  // tensor -> draws beyond its bound
  for (uint64_t seed : {3, 4, 5}) {
    auto [params, state] = model->initialize(seed);
    Tree opt = sgd.init(params);
    auto [pb, ob, sb, lb] = blocked(params, opt, state, x, y);
    auto [pp, op, sp, lp] = plain(params, opt, state, x, y);
    if (seed == 3) {
      // The blocked program holds blocked activations and converts some back; the plain one none.
      const std::string text = blocked.lastProgram().toText(), plainText = plain.lastProgram().toText();
      const std::string layout = "nChw" + std::to_string(block) + "c";
      EXPECT_NE(text.find(layout), std::string::npos) << text.substr(0, 2000);
      EXPECT_NE(text.find("relayout"), std::string::npos);
      EXPECT_EQ(plainText.find("nChw"), std::string::npos);
      // Blocked tensors are no larger; the relayout copies add little to the planned arena.
      EXPECT_LE(blocked.lastProgram().arenaBytes, plain.lastProgram().arenaBytes * 101 / 100);
    }
    // The loss is a forward value: a flipped tie moves it by the tie's own size, so always tight.
    EXPECT_LT(relativeError(lb.array(), lp.array(), 0), 1e-6) << "loss, seed " << seed;
    double drawWorst = 0;
    for (auto [a, b, what] : {std::tuple{&pb, &pp, "params"}, {&ob, &op, "momentum"}, {&sb, &sp, "bn state"}}) {
      double largest = 0;
      for (const auto& [name, t] : *b) largest = std::max(largest, maxAbs(t.array()));
      for (const auto& [name, t] : *b) {
        double e = relativeError(a->at(name).array(), t.array(), 1e-2 * largest);
        // A convolution bias that feeds a BatchNorm (every one but the shortcuts' conv3) has an
        // exactly zero gradient: both steps hold rounding noise there, which blocked BN statistics
        // reorder (measured: stem.conv.bias's momentum differs by 7.9e-7 of the largest entry).
        // The bound on those is 1e-5 of the largest entry: noise stays noise.
        bool zeroGradient = name.ends_with(".bias") && name.find("conv") != std::string::npos &&
                            name.find("conv3") == std::string::npos;
        if (!zeroGradient) drawWorst = std::max(drawWorst, e);
        if (e >= (zeroGradient ? 1e-3 : 1e-4)) ++offIn[std::string(what) + " " + name];
      }
    }
    std::printf("  blocked (nChw%lldc) vs plain step, seed %llu: worst relative difference %.2e\n",
                static_cast<long long>(block), static_cast<unsigned long long>(seed), drawWorst);
  }
  for (const auto& [name, draws] : offIn)
    EXPECT_LT(draws, 2) << name << " is off in " << draws << " of 3 draws: not a flipped ReLU tie";
  if (!offIn.empty())
    std::printf("  %zu tensors beyond the bound in one draw (a flipped ReLU tie)\n", offIn.size());
}

// `call()` with SPMD_CHANNELS_LAST=1 (read when a call compiles), unset again after, thrown or not.
template <typename F>
auto channelsLastDuring(F&& call) {
  struct Unset {
    ~Unset() { ::unsetenv("SPMD_CHANNELS_LAST"); }
  } unset;
  ::setenv("SPMD_CHANNELS_LAST", "1", 1);
  return call();
}

// Channels-last (SPMD_CHANNELS_LAST=1: "nhwc", the CUDA backend's layout) on sim, which runs the
// CUDA backend's own kernels (batch norm, fused, relayout) and the CPU's convolutions on plain
// copies: the ResNet-18 step gives the plain step's bits, in f32 and with bf16 compute, because
// batch norm and the reductions sum each channel's elements in the same order in both layouts
// and every other kernel computes each element alone. Two steps, the second from the first's
// results. Mutation: the fused kernels' broadcast coordinates taken in NCHW order fail it.
TEST(LayoutTest, ChannelsLastOnSimGivesThePlainStepsBits) {
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 4});
  optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  auto [x, y] = bench::syntheticBatch(3);
  for (DType compute : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtypeName(compute));
    auto channelsLast = jit(bench::trainStep(*model, sgd, compute), {.name = "nhwc", .devices = "sim"});
    auto plain = jit(bench::trainStep(*model, sgd, compute), {.name = "plain", .devices = "sim"});
    auto [params, state] = model->initialize(7);
    Tree opt = sgd.init(params);
    auto last1 = channelsLastDuring([&] { return channelsLast(params, opt, state, x, y); });
    auto last2 = channelsLast(std::get<0>(last1), std::get<1>(last1), std::get<2>(last1), x, y);
    auto plain1 = plain(params, opt, state, x, y);
    auto plain2 = plain(std::get<0>(plain1), std::get<1>(plain1), std::get<2>(plain1), x, y);
    const std::string text = channelsLast.lastProgram().toText(), plainText = plain.lastProgram().toText();
    // Every activation channels-last, and not one copy between layouts: the stem convolution
    // reads the plain images, pooling and the bias gradients' sums read nhwc as it is.
    EXPECT_GT(spmd::testing::countOccurrences(text, "nhwc"), 20u) << text.substr(0, 2000);
    EXPECT_EQ(text.find("relayout"), std::string::npos) << text;
    EXPECT_EQ(plainText.find("nhwc"), std::string::npos);
    spmd::testing::expectSameTrainStepBits(last1, plain1);
    spmd::testing::expectSameTrainStepBits(last2, plain2);
  }
}

// A junk SPMD_CHANNELS_LAST stops a run before its first step on any backend, the CPU included
// (which compiles without it), naming the variable: not a silent "off".
TEST(LayoutTest, AJunkChannelsLastSwitchStopsACpuRunBeforeItsFirstStep) {
  auto twice = jit([](const Tensor& x) { return x * 2.0; }, {.name = "twice", .devices = "cpu"});
  Array x = spmd::testing::randomArray(DType::f32, {4}, 1);
  ::setenv("SPMD_CHANNELS_LAST", "maybe", 1);
  const std::string error = spmd::testing::errorOf([&] { twice(x); });
  ::unsetenv("SPMD_CHANNELS_LAST");
  EXPECT_NE(error.find("SPMD_CHANNELS_LAST='maybe' is not a switch"), std::string::npos) << error;
  EXPECT_EQ(twice(x).array().values<float>()[0], 2.0f * x.values<float>()[0]);
}

// The same on a GPU (skipped without one): cuDNN's NHWC convolutions round differently from its
// NCHW ones, so the f32 step (TF32 off) is held to the plain step's loss within 1e-5 and to
// every tensor within 1e-3 of its tree's largest entry (a flipped ReLU tie, which moves
// gradients by ~1e-2 of it, would fail it by name: LayoutTest.BlockedStepEqualsThePlainStep saw
// none at most draws of batch 6); and the donated step still replays as one graph without host
// waits, relayouts none.
TEST(LayoutTest, OnAGpuChannelsLastStepMatchesThePlainStep) {
  std::string why;
  if (runtime::availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU: " << why;
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 16});
  optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  auto [x, y] = bench::syntheticBatch(16);
  // Donated as the sample does, so the step's buffers stay put and its graphs replay.
  auto channelsLast = jit(bench::trainStep(*model, sgd), {.name = "nhwc_gpu", .devices = "cuda:0", .donateArguments = {0, 1, 2}});
  auto plain = jit(bench::trainStep(*model, sgd), {.name = "plain_gpu", .devices = "cuda:0"});
  auto [params, state] = model->initialize(11);
  Tree opt = sgd.init(params);
  auto base = plain(params, opt, state, x, y);
  auto last = channelsLastDuring([&] { return channelsLast(params, opt, state, x, y); });
  EXPECT_EQ(channelsLast.lastProgram().toText().find("relayout"), std::string::npos);
  EXPECT_LT(relativeError(std::get<3>(last).array(), std::get<3>(base).array(), 0), 1e-5) << "loss";
  double worst = 0;
  for (auto [a, b, what] : {std::tuple{&std::get<0>(last), &std::get<0>(base), "params"},
                            {&std::get<1>(last), &std::get<1>(base), "momentum"},
                            {&std::get<2>(last), &std::get<2>(base), "bn state"}}) {
    double largest = 0;
    for (const auto& [name, t] : *b) largest = std::max(largest, maxAbs(t.array()));
    for (const auto& [name, t] : *b) {
      const double e = relativeError(a->at(name).array(), t.array(), largest);
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-3) << what << " " << name;
    }
  }
  std::printf("  channels-last vs plain step on %s: worst difference %.2e of a tree's largest entry\n",
              "cuda:0", worst);
  for (int call = 0; call < 3; ++call)  // graphs from the third call
    last = channelsLast(std::get<0>(last), std::get<1>(last), std::get<2>(last), x, y);
  EXPECT_EQ(channelsLast.lastCall().graphLaunches, 1);
  EXPECT_EQ(channelsLast.lastCall().hostWaitsInSteps, 0);
}

// The IR dump after spmd-assign-layouts shows the layouts in the tensor types.
// Inference at a batch large enough that the Winograd convolutions of stage 4 (128 channels at
// width 16, runtime/cpu/Winograd.cpp) take their tiles in two chunks, with running statistics
// far from the batch's: the blocked forward's logits equal the plain forward's.
TEST(LayoutTest, BlockedInferenceEqualsThePlainInference) {
  const int64_t block = runtime::CpuDevice().channelBlock();
  if (block == 0) GTEST_SKIP() << "oneDNN picks plain layouts on this CPU: nothing to compare";
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 16});
  auto [params, state] = model->initialize(5);
  auto forward = [&](const Tree& p, const Tree& s, const Tensor& x) {
    return model->apply(p, s, x, /*training=*/false).first;
  };
  auto [x, y] = bench::syntheticBatch(250);
  Tensor blocked = jit(forward, {.name = "blocked_eval"})(params, state, x);
  Tensor plain = jit(forward, {.name = "plain_eval", .assignLayouts = false})(params, state, x);
  double e = relativeError(blocked.array(), plain.array(), 0);
  EXPECT_LT(e, 1e-4);
  std::printf("  blocked vs plain inference logits, batch 250: worst relative difference %.2e\n", e);
}

TEST(LayoutTest, DumpShowsLayouts) {
  if (runtime::CpuDevice().channelBlock() == 0) GTEST_SKIP() << "oneDNN picks plain layouts on this CPU";
  const auto dir = std::filesystem::temp_directory_path() / ("spmd_layout_test-" + std::to_string(::getpid()));
  auto f = jit(
      [](const Tensor& x, const Tensor& w) { return mean(relu(conv2d(x, w, {}, {.padding = {1, 1}})), {0, 1, 2, 3}); },
      {.dumpDir = dir.string()});
  f(Tensor(spmd::testing::randomArray(DType::f32, {2, 3, 6, 6}, 1)),
    Tensor(spmd::testing::randomArray(DType::f32, {16, 3, 3, 3}, 2)));
  std::string dump;
  for (const auto& entry : std::filesystem::directory_iterator(f.lastDumpDir()))
    if (entry.path().filename().string().find("spmd-assign-layouts") != std::string::npos) {
      std::stringstream text;
      text << std::ifstream(entry.path()).rdbuf();
      dump = text.str();
    }
  ASSERT_FALSE(dump.empty()) << "no spmd-assign-layouts dump in " << f.lastDumpDir();
  EXPECT_NE(dump.find("tensor<2x16x6x6xf32, \"nChw"), std::string::npos) << dump;
  EXPECT_NE(dump.find("spmd.relayout"), std::string::npos) << dump;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spmd
