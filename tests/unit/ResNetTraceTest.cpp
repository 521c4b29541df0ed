// ResNet-18 traced through the whole pipeline: op counts in the dumped IR, parameter count,
// logits shape, and the compiled forward on the CPU backend against the same Program run on the
// reference kernels.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "TestUtil.h"
#include "compiler/Pipeline.h"
#include "frontend/Trace.h"
#include "frontend/spmd.h"
#include "runtime/exec/Executor.h"
#include "runtime/cpu/CpuDevice.h"
#include "frontend/models/ResNet.h"

namespace spmd {
namespace {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing dump " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(ResNetTraceTest, OpCountsParametersAndLogits) {
  auto model = models::resnet18();
  auto [params, state] = model->initialize(0);
  // PyTorch's module of the same architecture (tests/reference/torch_resnet18.py: d2l's
  // ResNet-18 with conv biases, 1 input channel, 10 classes) has 76 parameter tensors and
  // 11,175,818 parameters; TorchReferenceTest checks both against it.
  EXPECT_EQ(params.size(), 76u);
  EXPECT_EQ(params.numElements(), 11175818);
  EXPECT_EQ(state.size(), 34u);  // running mean and variance of 17 BatchNorms
  EXPECT_EQ(params.at("stage2.0.conv1.weight").shape(), (Shape{128, 64, 3, 3}));
  EXPECT_EQ(params.at("stage2.0.conv3.weight").shape(), (Shape{128, 64, 1, 1}));
  EXPECT_EQ(params.at("fc.weight").shape(), (Shape{10, 512}));

  const testing::ScratchDir scratch("spmd-resnet-trace");
  std::filesystem::path dir = scratch.path();
  auto forward = jit(
      [&](const Tree& p, const Tree& s, const Tensor& x) { return model->apply(p, s, x, true).first; },
      {.name = "resnet18", .dumpDir = dir.string()});
  Tensor logits = forward(params, state, Tensor(testing::randomArray(DType::f32, {4, 1, 28, 28}, 3)));
  dir = forward.lastDumpDir();  // <dumpDir>/resnet18-<hash>/
  EXPECT_EQ(dir.filename().string().rfind("resnet18-", 0), 0u) << dir;
  EXPECT_EQ(logits.shape(), (Shape{4, 10}));
  for (float v : logits.array().values<float>()) EXPECT_TRUE(std::isfinite(v));

  // The architecture's own counts (the same in torch_resnet18.py's module): 20 convolutions (the
  // stem's, two per block of 8, three 1x1 projections), 17 BatchNorms (the stem's and two per
  // block; d2l's projections have none), one linear layer, one global average pool.
  for (const char* stage : {"00-tracing.mlir", "04-cse.mlir"}) {
    std::string ir = readFile(dir / stage);
    SCOPED_TRACE(stage);
    EXPECT_EQ(count(ir, "= spmd.conv2d "), 20);
    EXPECT_EQ(count(ir, "= spmd.batch_norm_train "), 17);
    EXPECT_EQ(count(ir, "= spmd.matmul "), 1);
    EXPECT_EQ(count(ir, "= spmd.reduce_mean "), 1);
    EXPECT_NE(ir.find("loc(\"stage2.0.conv1\""), std::string::npos) << "ops carry their layer path";
    EXPECT_NE(ir.find("tests/unit/ResNetTraceTest.cpp"), std::string::npos) << "ops carry the user's file";
  }
  // Running-stat updates are not returned here, so canonicalization removes them.
  EXPECT_GT(count(readFile(dir / "00-tracing.mlir"), "= spmd.mul "), 0);
  EXPECT_EQ(count(readFile(dir / "04-cse.mlir"), "= spmd.mul "), 0);
  std::string program = readFile(dir / "program.txt");
  EXPECT_EQ(count(program, "  conv2d ("), 20);
  EXPECT_EQ(count(program, "  batch_norm_train ("), 17);
}

// ApplyOptions::intermediates (Flax's capture_intermediates): every layer's output under its
// path, the same values the uncaptured step computes, readable back from a jit.
TEST(ResNetTraceTest, CapturedIntermediatesAreEveryLayersOutput) {
  auto model = models::resnet18({.width = 4});
  auto [params, state] = model->initialize(5);
  Array x = testing::randomArray(DType::f32, {3, 1, 28, 28}, 6);
  auto plain = jit([&](const Tree& p, const Tree& s, const Tensor& xs) { return model->apply(p, s, xs, true).first; });
  auto captured = jit([&](const Tree& p, const Tree& s, const Tensor& xs) {
    Tree layers;
    Tensor y = model->apply(p, s, xs, {.training = true, .intermediates = &layers}).first;
    return std::pair{y, layers};
  });
  Array logits = plain(params, state, Tensor(x)).array();
  auto [y, layers] = captured(params, state, Tensor(x));
  // 20 convolutions, 17 BNs, the stem's ReLU, 8 blocks, 4 stages, stem, pool, flatten, fc, output.
  EXPECT_EQ(layers.size(), 20u + 17 + 1 + 8 + 4 + 1 + 4);
  EXPECT_EQ(layers.at("stage2.0").shape(), (Shape{3, 8, 14, 14}));
  EXPECT_EQ(layers.at("stage2.0.conv3").shape(), (Shape{3, 8, 14, 14}));
  EXPECT_EQ(layers.at("pool").shape(), (Shape{3, 4 << 3}));
  auto bits = [](const Array& a) { return std::vector<float>(a.values<float>().begin(), a.values<float>().end()); };
  EXPECT_EQ(bits(y.array()), bits(logits)) << "capturing changes no value";
  EXPECT_EQ(bits(layers.at("output").array()), bits(logits));
  EXPECT_EQ(bits(layers.at("fc").array()), bits(logits));
  EXPECT_EQ(bits(layers.at("stem").array()), bits(layers.at("stem.relu").array()));
  // The stem's ReLU applied to its BN's output, element by element; the BN's output has both signs.
  auto bn = bits(layers.at("stem.bn").array()), relu = bits(layers.at("stem.relu").array());
  int negative = 0;
  for (size_t i = 0; i < bn.size(); ++i) {
    negative += bn[i] < 0;
    ASSERT_EQ(relu[i], std::max(bn[i], 0.0f)) << "element " << i;
  }
  EXPECT_GT(negative, 0);
  EXPECT_LT(negative, int(bn.size()));
}

class ReferenceDevice final : public runtime::Device {
 public:
  std::string name() const override { return "reference"; }
  const runtime::KernelTable& kernels() const override { return runtime::referenceKernels(); }
  std::shared_ptr<std::byte> allocate(size_t bytes) override {
    return std::shared_ptr<std::byte>(new std::byte[bytes ? bytes : 1], std::default_delete<std::byte[]>());
  }
  bool hostAccessible() const override { return true; }
  void copyToDevice(std::byte* d, const std::byte* s, size_t n) override { std::memcpy(d, s, n); }
  void copyToHost(std::byte* d, const std::byte* s, size_t n) override { std::memcpy(d, s, n); }
  void copyOnDevice(std::byte* d, const std::byte* s, size_t n) override { std::memmove(d, s, n); }
};

// The whole network (reduced width, both BN modes) on the CPU backend vs the reference kernels.
TEST(ResNetTraceTest, CpuForwardMatchesReferenceForward) {
  auto model = models::resnet18({.width = 4});
  auto [params, state] = model->initialize(7);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    detail::Trace trace("resnet18_reference_check");
    std::vector<Array> inputs;
    auto traceTree = [&](const Tree& tree) {
      Tree traced;
      for (const auto& [name, value] : tree) {
        traced.set(name, trace.addArgument(value.dtype(), value.shape()));
        inputs.push_back(value.array());
      }
      return traced;
    };
    Tree p = traceTree(params), s = traceTree(state);
    Tensor x = trace.addArgument(DType::f32, {3, 1, 28, 28});
    inputs.push_back(testing::randomArray(DType::f32, {3, 1, 28, 28}, 11));
    auto [y, newState] = model->apply(p, s, x, training);
    std::vector<Tensor> outputs{y};
    for (const auto& [_, v] : newState) outputs.push_back(v);
    trace.finish(outputs, Loc::current());
    runtime::Program program = compile(trace.module());
    runtime::Executor cpu(program, std::make_shared<runtime::CpuDevice>());
    runtime::Executor reference(program, std::make_shared<ReferenceDevice>());
    std::vector<Array> got = cpu.run(inputs), want = reference.run(inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      double worst = testing::expectClose(got[i], want[i], 1e-3, 1e-4, "output " + std::to_string(i));
      if (i == 0) std::printf("  logits: max |cpu - reference| = %.3g\n", worst);
    }
  }
}

}  // namespace
}  // namespace spmd
