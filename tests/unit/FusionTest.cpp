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
#include "frontend/models/Transformer.h"

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

// The decoder block in mixed precision: its products' widenings and roundings sit across the
// reshapes and transposes of the heads; they move across them (the views then move bf16
// elements) and fuse with the bias, residual and GELU chains. Same bits as unfused, fewer
// converts and no f32 view of a bf16 product's result left.
TEST(FusionTest, Bf16DecoderBlockWithRoundingsMovedAcrossViewsIsBitIdenticalToUnfused) {
  constexpr int64_t vocab = 64, tokens = 8, batch = 2;
  Tree params = models::transformerInit(vocab, 32, 64, DType::f32, 5);
  auto loss = [](const Tree& p, const Tensor& ids, const Tensor& next) {
    Tensor logits = models::transformerLogits(p, ids, {.heads = 4, .compute = DType::bf16});
    return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), reshape(next, {-1})), {0});
  };
  auto step = [&](const Tree& p, const Tensor& ids, const Tensor& next) {
    return value_and_grad([&](const Tree& q) { return loss(q, ids, next); })(p);
  };
  std::vector<int32_t> ids(batch * tokens), next(batch * tokens);
  for (int64_t i = 0; i < batch * tokens; ++i) ids[i] = int32_t(i * 37 % vocab), next[i] = int32_t((i + 1) * 37 % vocab);
  Tensor x = Array::of<int32_t>({batch, tokens}, ids), y = Array::of<int32_t>({batch, tokens}, next);
  for (const char* devices : {"cpu", "sim"}) {
    SCOPED_TRACE(devices);
    auto fused = jit(step, {.name = "fused", .devices = devices});
    auto plain = jit(step, {.name = "plain", .devices = devices, .fuseElementwise = false});
    auto [lossA, gradsA] = fused(params, x, y);
    auto [lossB, gradsB] = plain(params, x, y);
    testing::expectSameBits(lossA.array(), lossB.array(), "loss");
    testing::expectSameBits(gradsA, gradsB, "grads");
    const std::string& text = fused.lastProgramText();
    const size_t converts = countOccurrences(text, "  convert ("), before = countOccurrences(plain.lastProgramText(), "  convert (");
    std::printf("  %s: %zu converts unfused, %zu fused\n", devices, before, converts);
    EXPECT_LT(converts * 2, before) << text;
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
