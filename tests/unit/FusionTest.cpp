// Elementwise fusion end to end: a ResNet-18 SGD step with fused kernels equals the unfused step
// to the bit on the CPU (both compute each op in the tensor's type), and the residual add+relu,
// optimizer chains and relu backward with the gradient sums are fused while convolutions and BN stay library calls.

#include "KernelCases.h"
#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "frontend/spmd.h"
#include "runtime/program/FusedBody.h"
#include "frontend/models/Cnn.h"
#include "frontend/models/ResNet.h"

namespace spmd {
namespace {

using spmd::testing::countOccurrences;

TEST(FusionTest, ResNetTrainStepIsBitIdenticalFusedAndUnfused) {
  auto model = models::resnet18({.width = 4});
  auto [params, state] = model->initialize(9);
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4});
  Tree opt = sgd.init(params);
  auto [x, y] = bench::syntheticBatch(5);
  auto fused = jit(bench::trainStep(*model, sgd), {.name = "fused"});
  auto plain = jit(bench::trainStep(*model, sgd), {.name = "plain", .fuseElementwise = false});
  auto a = fused(params, opt, state, x, y);
  auto b = plain(params, opt, state, x, y);
  testing::expectSameTrainStepBits(a, b);

  const std::string& text = fused.lastProgramText();
  const std::string& unfused = plain.lastProgramText();
  size_t fusedSteps = countOccurrences(text, "  fused (");
  std::printf("  steps: %zu unfused, %zu with fusion (%zu fused kernels)\n", countOccurrences(unfused, ") -> ("),
              countOccurrences(text, ") -> ("), fusedSteps);
  EXPECT_EQ(countOccurrences(unfused, "  fused ("), 0u);
  // Every parameter's SGD update (weight decay, momentum, step) is one segment of one fused
  // kernel (compiler/BatchFused), and the bits above are the unfused step's.
  EXPECT_EQ(countOccurrences(text, "segments = " + std::to_string(std::get<0>(a).size()) + "}"), 1u) << text;
  EXPECT_GT(fusedSteps, 20u);
  EXPECT_LT(countOccurrences(text, ") -> ("), countOccurrences(unfused, ") -> (")) << "fusion removes steps";
  EXPECT_EQ(countOccurrences(text, "  conv2d ("), countOccurrences(unfused, "  conv2d ("));
  EXPECT_EQ(countOccurrences(text, "  batch_norm_train ("), countOccurrences(unfused, "  batch_norm_train ("));
  // 17 ReLUs: the architecture's (the stem's and two per block of 8, as PyTorch's module has).
  // The 8 residual add + relu pairs are fused kernels; the relus right after a BN (the stem's
  // and each block's first) become the batch norm's relu (spmd-fuse-relu): none is left.
  EXPECT_EQ(countOccurrences(unfused, "  relu ("), 17u);
  EXPECT_EQ(countOccurrences(text, "  relu ("), 0u);
  EXPECT_EQ(countOccurrences(text, "relu = true"), 9u);
  EXPECT_EQ(countOccurrences(unfused, "relu = true"), 0u);
  EXPECT_NE(text.find("relu_backward"), std::string::npos);
}

// The seeds' Flax CNN (conv + bias -> relu twice, no batch norm): each convolution's relu
// becomes its attribute (spmd-fuse-relu), and the step gives the unfused step's bits on the CPU
// (a pass after whichever variant ran) and on sim (the GPU backend's path: the CPU's kernel as
// cuDNN's stand-in, pinned to the gemm variant the CUDA backend's own epilogue).
TEST(FusionTest, ConvolutionReluStepIsBitIdenticalFusedAndUnfused) {
  auto model = models::cnn({.channels1 = 8, .channels2 = 16, .hidden = 32});
  auto [params, state] = model->initialize(4);
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  Tree opt = sgd.init(params);
  auto [x, y] = bench::syntheticBatch(6);
  for (const char* devices : {"cpu", "sim"})
    for (const char* pin : {"", "conv2d:gemm"}) {
      if (std::string(devices) == "cpu" && *pin) continue;
      SCOPED_TRACE(std::string(devices) + " " + pin);
      runtime::PinnedKernels pinned(pin);
      auto fused = jit(bench::trainStep(*model, sgd), {.name = "fused", .devices = devices});
      auto plain = jit(bench::trainStep(*model, sgd), {.name = "plain", .devices = devices, .fuseElementwise = false});
      testing::expectSameTrainStepBits(fused(params, opt, state, x, y), plain(params, opt, state, x, y));
      const std::string& text = fused.lastProgramText();
      EXPECT_EQ(countOccurrences(text, "relu = true"), 2u) << text;
      EXPECT_EQ(countOccurrences(plain.lastProgramText(), "relu = true"), 0u);
      EXPECT_EQ(countOccurrences(text, "  relu ("), 1u) << "the dense layer's relu stays";
    }
}

// Mixed precision: spmd-widen-bf16's roundings and widenings fuse with the elementwise ops
// between them, so the bodies read bf16 activations and gradients and write bf16 results
// themselves. The step gives the unfused step's bits on the CPU (blocked layouts, vector loops)
// and on sim (the generated CUDA source, built for the host), and keeps fewer converts.
TEST(FusionTest, Bf16StepWithFusedRoundingsIsBitIdenticalToUnfused) {
  auto model = models::resnet18({.width = 4});
  auto [params, state] = model->initialize(11);
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4});
  Tree opt = sgd.init(params);
  auto [x, y] = bench::syntheticBatch(5);
  for (const char* devices : {"cpu", "sim"}) {
    SCOPED_TRACE(devices);
    auto fused = jit(bench::trainStep(*model, sgd, DType::bf16), {.name = "fused", .devices = devices});
    auto plain =
        jit(bench::trainStep(*model, sgd, DType::bf16), {.name = "plain", .devices = devices, .fuseElementwise = false});
    testing::expectSameTrainStepBits(fused(params, opt, state, x, y), plain(params, opt, state, x, y));
    const std::string& text = fused.lastProgramText();
    const size_t converts = countOccurrences(text, "  convert ("), before = countOccurrences(plain.lastProgramText(), "  convert (");
    std::printf("  %s: %zu converts unfused, %zu with the roundings fused (%zu bodies round to bf16)\n", devices, before,
                converts, countOccurrences(text, "round_bf16"));
    EXPECT_GT(countOccurrences(text, "round_bf16"), 10u) << text;
    EXPECT_LT(converts * 3, before) << "most roundings and widenings are fused";
    EXPECT_EQ(countOccurrences(text, "  relu_backward ("), 0u) << "each relu_backward is fused with its converts";
  }
}

TEST(FusionTest, MalformedBodiesAreClearErrors) {
  auto message = [](const std::string& body) {
    try {
      runtime::FusedBody::parse(body);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("%0 = load 0; %1 = relu %0; yield %1"), "no error");
  EXPECT_NE(message("%0 = load 0; %1 = relu %3; yield %1").find("operand %3 is used before it is defined"),
            std::string::npos);
  EXPECT_NE(message("%0 = load 0; %1 = softmax %0; yield %1").find("unknown op 'softmax'"), std::string::npos);
  EXPECT_NE(message("%0 = load 0; %2 = relu %0; yield %2").find("expected %1 ="), std::string::npos);
  EXPECT_NE(message("%0 = load 0; %1 = add %0; yield %1").find("expected an operand %N"), std::string::npos);
  EXPECT_NE(message("%0 = load 0 dims 1; yield %0").find("dims must be a list"), std::string::npos);
  EXPECT_NE(message("%0 = load 0; %1 = relu %0").find("has no yield"), std::string::npos);
  EXPECT_NE(message("%0 = load 0; yield %0; %1 = relu %0").find("nothing may follow yield"), std::string::npos);
  EXPECT_NE(message("%0 = const x; yield %0").find("const needs a number"), std::string::npos);
  EXPECT_NE(message("%0 = load 0; %1 = round_bf16; yield %1").find("expected an operand %N"), std::string::npos);

  runtime::FusedInstr load = runtime::FusedBody::parse("%0 = load 0 dims [1]; yield %0").instrs[0];
  std::vector<int64_t> space{2, 3, 4}, channels{3}, wrong{4};
  EXPECT_EQ(runtime::loadStrides(load, channels, space), (std::vector<int64_t>{0, 1, 0}));
  EXPECT_THROW(runtime::loadStrides(load, wrong, space), Error);
}

}  // namespace
}  // namespace spmd
