// NaN semantics as PyTorch and JAX: relu, max (elementwise, reductions, pmax) and the fused
// kernels propagate NaN on the CPU and reference backends; relu's gradient passes dy where the
// result is NaN; argmax returns the first NaN. Plus the debug mode (SPMD_DEBUG_NANS, debugNans),
// which stops at the first op producing a NaN or an infinity and names it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "KernelCases.h"
#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/device/Kernel.h"
#include "runtime/cpu/CpuDevice.h"

namespace spmd {
namespace {

using runtime::KernelCase;
using runtime::runKernel;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Array f32(std::vector<float> values, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  return Array::of<float>(shape, values);
}

// The kernel's outputs on both the CPU and the reference backend (which must agree bit for bit
// on where NaNs are).
std::vector<std::vector<Array>> onBothBackends(const KernelCase& c) {
  return {runKernel(runtime::cpuKernels(), c), runKernel(runtime::referenceKernels(), c)};
}

using spmd::testing::errorOf;

TEST(NanSemanticsTest, ReluAndMaxPropagateNan) {
  Array x = f32({kNan, -1, 2, -kInf, kInf, 0});
  for (auto& out : onBothBackends({"relu", "relu", {x}, {{DType::f32, {6}}}, {}})) {
    auto v = out[0].values<float>();
    EXPECT_TRUE(std::isnan(v[0])) << "relu(NaN) must be NaN, as in PyTorch and JAX";
    EXPECT_EQ(v[1], 0.f);
    EXPECT_EQ(v[2], 2.f);
    EXPECT_EQ(v[3], 0.f);
    EXPECT_EQ(v[4], kInf);
    EXPECT_EQ(v[5], 0.f);
  }
  Array a = f32({kNan, 1, kNan, 3}), b = f32({1, kNan, kNan, 2});
  for (auto& out : onBothBackends({"max", "max", {a, b}, {{DType::f32, {4}}}, {}})) {
    auto v = out[0].values<float>();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2])) << "either operand NaN: NaN";
    EXPECT_EQ(v[3], 3.f);
  }
  // relu's gradient: dy where the relu result is NaN (PyTorch's threshold_backward), 0 where <= 0.
  Array dy = f32({5, 6, 7}), y = f32({kNan, 0, 2});
  for (auto& out : onBothBackends({"relu bwd", "relu_backward", {dy, y}, {{DType::f32, {3}}}, {}})) {
    auto v = out[0].values<float>();
    EXPECT_EQ(v[0], 5.f);
    EXPECT_EQ(v[1], 0.f);
    EXPECT_EQ(v[2], 7.f);
  }
}

TEST(NanSemanticsTest, PmaxAndPminPropagateNanFromAnyReplica) {
  // Replica r gets elements [2r, 2r + 2); only replica 2 holds a NaN (in its first element),
  // so a fold that drops a NaN arriving after a number would return 3 and 5.
  Array x = f32({1, 5, 2, 6, kNan, 7, 3, 8});
  for (const char* devices : {"cpu:4", "sim:4"}) {
    auto f = pmap([](const Tensor& v) { return std::tuple{pmax(v, "batch"), pmin(v, "batch")}; },
                  {.inAxes = {split}, .devices = devices});
    auto [high, low] = f(x);
    auto hi = high.array().values<float>(), lo = low.array().values<float>();
    EXPECT_TRUE(std::isnan(hi[0])) << devices;
    EXPECT_TRUE(std::isnan(lo[0])) << devices;
    EXPECT_EQ(hi[1], 8.0f) << devices;
    EXPECT_EQ(lo[1], 5.0f) << devices;
  }
}

TEST(NanSemanticsTest, MaxReductionAndArgmaxSeeNan) {
  // Rows: a NaN in the middle, NaN first, two NaNs, none.
  Array x = f32({1, kNan, 3, kNan, 5, 9, 2, kNan, kNan, 4, 8, 6}, {4, 3});
  for (auto& out : onBothBackends({"max rows", "reduce_max", {x}, {{DType::f32, {4}}}, {{"axes", std::vector<int64_t>{1}}}})) {
    auto v = out[0].values<float>();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2]));
    EXPECT_EQ(v[3], 8.f);
  }
  for (auto& out : onBothBackends({"argmax rows", "argmax", {x}, {{DType::i32, {4}}}, {{"axis", int64_t{1}}}})) {
    auto v = out[0].values<int32_t>();
    EXPECT_EQ(v[0], 1) << "the index of the first NaN (numpy, PyTorch and JAX)";
    EXPECT_EQ(v[1], 0);
    EXPECT_EQ(v[2], 1);
    EXPECT_EQ(v[3], 1);
  }
}

TEST(NanSemanticsTest, PoolingAndSoftmaxSeeNan) {
  // One 2x4 plane, two 2x2 windows: the left one holds a NaN after a larger number, the right
  // one none. The NaN wins the max window and receives its whole gradient; the average is NaN.
  Array x = f32({9, kNan, 1, 2, 3, 4, 5, 0}, {1, 1, 2, 4});
  std::map<std::string, runtime::Attr> attrs = {{"window", std::vector<int64_t>{2, 2}},
                                                {"stride", std::vector<int64_t>{2, 2}},
                                                {"padding", std::vector<int64_t>{0, 0}},
                                                {"dilation", std::vector<int64_t>{1, 1}},
                                                {"count_include_pad", true},
                                                {"reduction", std::string("max")}};
  for (auto& out : onBothBackends({"max_pool", "reduce_window", {x}, {{DType::f32, {1, 1, 1, 2}}}, attrs})) {
    auto v = out[0].values<float>();
    EXPECT_TRUE(std::isnan(v[0])) << "a NaN in the window makes max_pool2d NaN (PyTorch)";
    EXPECT_EQ(v[1], 5.f);
  }
  std::map<std::string, runtime::Attr> mean = attrs;
  mean["reduction"] = std::string("mean");
  for (auto& out : onBothBackends({"avg_pool", "reduce_window", {x}, {{DType::f32, {1, 1, 1, 2}}}, mean})) {
    EXPECT_TRUE(std::isnan(out[0].values<float>()[0]));
    EXPECT_EQ(out[0].values<float>()[1], 2.f);
  }
  Array dy = f32({10, 20}, {1, 1, 1, 2});
  for (auto& out : onBothBackends({"max_pool bwd", "reduce_window_backward", {dy, x}, {{DType::f32, {1, 1, 2, 4}}}, attrs})) {
    auto v = out[0].values<float>();
    std::vector<float> expected = {0, 10, 0, 0, 0, 0, 20, 0};
    EXPECT_EQ(std::vector<float>(v.begin(), v.end()), expected) << "the gradient goes to the NaN, not the 9";
  }
  // softmax of a row with a NaN is NaN throughout; other rows are untouched.
  Array logits = f32({1, kNan, 2, 0, 1, 2}, {2, 3});
  for (auto& out : onBothBackends({"softmax", "softmax", {logits}, {{DType::f32, {2, 3}}}, {{"axis", int64_t{1}}}})) {
    auto v = out[0].values<float>();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2]));
    EXPECT_NEAR(v[3] + v[4] + v[5], 1.0f, 1e-6);
  }
  // Rows of 40: the CPU's row maximum folds 16 lanes as vectors, then the last 8 one by one; a
  // NaN in either part (row 0: element 20, row 1: element 37) makes its row's softmax and loss
  // NaN, and row 2's are finite.
  std::vector<float> wide(3 * 40);
  for (size_t i = 0; i < wide.size(); ++i) wide[i] = float(i % 7) - 3;
  wide[20] = wide[40 + 37] = kNan;
  const Array rows = f32(wide, {3, 40});
  for (auto& out : onBothBackends({"wide softmax", "softmax", {rows}, {{DType::f32, {3, 40}}}, {{"axis", int64_t{1}}}})) {
    auto v = out[0].values<float>();
    for (int r = 0; r < 3; ++r)
      for (int j = 0; j < 40; ++j) EXPECT_EQ(std::isnan(v[r * 40 + j]), r < 2) << "row " << r << ", element " << j;
  }
  const std::vector<int32_t> classes = {1, 2, 3};
  const Array labels = Array::of<int32_t>({3}, classes);
  for (auto& out : onBothBackends({"wide cross-entropy", "softmax_cross_entropy", {rows, labels}, {{DType::f32, {3}}}, {}})) {
    auto v = out[0].values<float>();
    EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1]));
    EXPECT_TRUE(std::isfinite(v[2]) && v[2] > 0) << v[2];
  }
}

TEST(NanSemanticsTest, FusedKernelsAndCompiledStepsPropagateNan) {
  // relu(x * 2) and max(x, 0) fuse into one kernel; a NaN pixel stays NaN through both.
  auto f = jit([](const Tensor& x) {
    return std::tuple{relu(mul(x, fill(x, 2.0))), maximum(x, fill(x, 0.0)), max(x, {1}), argmax(x, 1)};
  });
  Array x = f32({0.5f, kNan, -1, 2, -3, 4}, {2, 3});
  auto [r, m, rowMax, arg] = f(x);
  auto rv = r.array().values<float>(), mv = m.array().values<float>();
  EXPECT_EQ(rv[0], 1.f);
  EXPECT_TRUE(std::isnan(rv[1]));
  EXPECT_EQ(rv[2], 0.f);
  EXPECT_TRUE(std::isnan(mv[1]));
  EXPECT_TRUE(std::isnan(rowMax.array().values<float>()[0]));
  EXPECT_EQ(rowMax.array().values<float>()[1], 4.f);
  EXPECT_EQ(arg.array().values<int32_t>()[0], 1);
  EXPECT_EQ(arg.array().values<int32_t>()[1], 2);
  EXPECT_NE(f.lastProgramText().find("fused"), std::string::npos) << "the elementwise chain is fused";
}

TEST(NanSemanticsTest, DebugNansNamesTheFirstOpTheLayerAndTheLine) {
  const int line = __LINE__ + 1;
  auto f = jit([](const Tensor& x) { return relu(log(x)); }, {.name = "nan_probe", .debugNans = true});
  Array x = f32({1, 2, 3, -4, 5, 6}, {2, 3});
  std::string message = errorOf([&] { f(x); });
  EXPECT_NE(message.find("'log' (tests/unit/NanSemanticsTest.cpp:" + std::to_string(line) + ")"), std::string::npos)
      << message;
  EXPECT_NE(message.find("its output 0 (f32[2, 3]) holds NaN at [1, 0] (1 of 6 elements)"), std::string::npos)
      << message;
  EXPECT_NE(message.find("stopped by SPMD_DEBUG_NANS"), std::string::npos) << message;
  // Without the debug mode the same call returns the NaN quietly (as PyTorch and JAX do).
  auto quiet = jit([](const Tensor& x) { return relu(log(x)); });
  EXPECT_TRUE(std::isnan(quiet(x).array().values<float>()[3]));

  // Inside a layer the error names the layer path too: a Linear whose product overflows f32.
  nn::Linear head("head", 3, 2);
  auto [params, state] = head.initialize(1);
  Tree big;
  for (const auto& [name, t] : params) {
    Array a = Array::zeros(DType::f32, t.shape());
    for (float& v : a.values<float>()) v = 1e38f;
    big.set(name, a);
  }
  const int layerLine = __LINE__ + 2;
  auto g = jit([&](const Tree& p, const Tensor& in) {
    return head.apply(p, Tree{}, in, true).first;
  }, {.debugInfs = true});
  std::string overflow = errorOf([&] { g(big, x); });
  EXPECT_NE(overflow.find("'matmul' (head, tests/unit/NanSemanticsTest.cpp:" + std::to_string(layerLine) + ")"),
            std::string::npos) << overflow;
  EXPECT_NE(overflow.find("holds an infinity"), std::string::npos) << overflow;
}

TEST(NanSemanticsTest, DebugNansUnderPmapNamesTheReplicaAndInputs) {
  auto f = pmap([](const Tensor& x) { return sqrt(x); },
                {.inAxes = {split}, .outAxes = {split}, .devices = "cpu:2", .debugNans = true});
  std::string message = errorOf([&] { f(f32({1, 4, 9, -1})); });  // replica 1 gets [9, -1]
  EXPECT_EQ(message.rfind("replica 1 of 2 (cpu:1) failed", 0), 0u) << message;
  EXPECT_NE(message.find("'sqrt'"), std::string::npos) << message;
  EXPECT_NE(message.find("holds NaN at [1]"), std::string::npos) << message;
  // A NaN already in an input is reported as that input, not blamed on the first op.
  std::string input = errorOf([&] { f(f32({1, kNan, 9, 16})); });
  EXPECT_NE(input.find("input 0 of @main (f32[2]) holds NaN at [1]"), std::string::npos) << input;
  auto infs = jit([](const Tensor& x) { return div(x, sub(x, x)); }, {.debugInfs = true});
  std::string inf = errorOf([&] { infs(f32({1, 2})); });
  EXPECT_NE(inf.find("'div'"), std::string::npos) << inf;
  EXPECT_NE(inf.find("holds an infinity at [0]"), std::string::npos) << inf;
}

}  // namespace
}  // namespace spmd
