// Tensors with a zero extent, on the CPU backend and on sim (the CUDA kernels' code): a step whose
// outputs hold nothing runs nothing; a convolution or matmul whose sums run over nothing (a batch of
// 0 for a filter gradient, K = 0, 0 input channels) gives the empty sum, zeros plus the bias;
// NumPy's broadcasting takes 1 against 0 to 0; the ops that cannot answer (argmax over an empty
// axis, batch statistics of no value) are refused at the caller's line. Each of these crashed the
// process (a division by the empty extent) or failed with another op's message before.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/cpu/CpuVariants.h"
#include "runtime/device/Driver.h"
#include "runtime/program/OpAttrs.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.array().numel(); ++i) out.push_back(spmd::testing::valueAt(t.array(), i));
  return out;
}

Array ramp(const Shape& shape, double from, double step) {
  Array a = Array::zeros(DType::f32, shape);
  for (int64_t i = 0; i < a.numel(); ++i) a.values<float>()[i] = float(from + step * double(i));
  return a;
}

class EmptyTensorTest : public ::testing::TestWithParam<const char*> {};

TEST_P(EmptyTensorTest, ConvolutionsAndMatmulsOverNothingGiveTheEmptySum) {
  const JitOptions on{.devices = GetParam()};
  // A batch of 0: nothing to compute forward, and the filter's and bias's gradients are sums over
  // no image: zeros.
  const Array none = Array::zeros(DType::f32, {0, 3, 8, 8}), w = ramp({16, 3, 3, 3}, -1, 0.01), b = ramp({16}, -3, 0.5);
  auto step = jit([](const Tensor& x, const Tensor& k, const Tensor& bias) {
    Tensor y = conv2d(x, k, bias, {.padding = {1, 1}});
    Tree p;
    p.set("k", k);
    p.set("b", bias);
    Tree g = grad([&](const Tree& q) { return sum(conv2d(x, q.at("k"), q.at("b"), {.padding = {1, 1}}), {0, 1, 2, 3}); })(p);
    return std::tuple{y, g.at("k"), g.at("b")};
  }, on);
  auto [y, dk, db] = step(none, w, b);
  EXPECT_EQ(y.array().shape, (Shape{0, 16, 8, 8}));
  EXPECT_EQ(values(dk), std::vector<double>(16 * 27, 0.0));
  EXPECT_EQ(values(db), std::vector<double>(16, 0.0));
  // 0 input channels: every output is its channel's bias (16 channels: the CPU's blocked layout),
  // through the fused relu.
  auto noChannels = jit([](const Tensor& x, const Tensor& k, const Tensor& bias) {
    return relu(conv2d(x, k, bias, {.padding = {1, 1}}));
  }, on)(Array::zeros(DType::f32, {2, 0, 5, 5}), Array::zeros(DType::f32, {16, 0, 3, 3}), b);
  ASSERT_EQ(noChannels.array().shape, (Shape{2, 16, 5, 5}));
  const std::vector<double> got = values(noChannels);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], std::max(0.0, -3 + 0.5 * double((i / 25) % 16))) << "element " << i;
  // K = 0: each row is the bias; M = 0 and a batch of 0 matrices: nothing.
  auto rows = jit([](const Tensor& a, const Tensor& m, const Tensor& bias) { return matmul(a, m, bias); }, on)(
      Array::zeros(DType::f32, {3, 0}), Array::zeros(DType::f32, {0, 4}), ramp({4}, 1, 1));
  EXPECT_EQ(values(rows), (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
  auto product = jit([](const Tensor& a, const Tensor& m) { return matmul(a, m); }, on);
  EXPECT_EQ(product(Array::zeros(DType::f32, {0, 5}), ramp({5, 4}, 0, 1)).array().shape, (Shape{0, 4}));
  EXPECT_EQ(product(Array::zeros(DType::f32, {0, 2, 5}), Array::zeros(DType::f32, {0, 5, 4})).array().shape,
            (Shape{0, 2, 4}));
}

TEST_P(EmptyTensorTest, ReductionsBroadcastsAndSegmentsOfNothing) {
  const JitOptions on{.devices = GetParam()};
  const Array rows0 = Array::zeros(DType::f32, {0, 5});
  // argmax along a full axis of an empty tensor: an empty result; NumPy's broadcasting of [1, 5]
  // and [5] against [0, 5]; layerNorm of no row.
  auto f = jit([](const Tensor& x, const Tensor& y, const Tensor& one) {
    return std::tuple{argmax(x, 1), mul(y, one), add(y, reshape(one, {5})), layerNorm(y, reshape(one, {5}), reshape(one, {5}))};
  }, on);
  auto [best, product, total, normed] = f(Array::zeros(DType::f32, {4, 3, 0}), rows0, ramp({1, 5}, 1, 1));
  EXPECT_EQ(best.array().shape, (Shape{4, 0}));
  EXPECT_EQ(product.array().shape, (Shape{0, 5}));
  EXPECT_EQ(total.array().shape, (Shape{0, 5}));
  EXPECT_EQ(normed.array().shape, (Shape{0, 5}));
  // Reductions over nothing: sums 0, maxima -inf.
  auto over = jit([](const Tensor& x) { return std::tuple{sum(x, {0}), max(x, {0})}; }, on)(rows0);
  EXPECT_EQ(values(std::get<0>(over)), std::vector<double>(5, 0.0));
  EXPECT_EQ(values(std::get<1>(over)), std::vector<double>(5, -std::numeric_limits<double>::infinity()));
  // Segments of no row: sums 0, maxima -inf (jax's).
  auto segments = jit([](const Tensor& x, const Tensor& ids) {
    return std::tuple{segmentSum(x, ids, 3), segmentMax(x, ids, 3)};
  }, on);
  auto [sums, maxima] = segments(rows0, Array::zeros(DType::i32, {0}));
  EXPECT_EQ(values(sums), std::vector<double>(15, 0.0));
  EXPECT_EQ(values(maxima), std::vector<double>(15, -std::numeric_limits<double>::infinity()));
  // Inference on an empty batch is empty; batch statistics of no value are refused.
  const Array scale = ramp({3}, 1, 0), stats = ramp({3}, 0.5, 0);
  auto infer = jit([](const Tensor& x, const Tensor& s, const Tensor& m) { return batchNormInfer(x, s, m, m, s, 1e-5); }, on);
  EXPECT_EQ(infer(Array::zeros(DType::f32, {0, 3, 8, 8}), scale, stats).array().shape, (Shape{0, 3, 8, 8}));
  const std::string noValues = errorOf([&] {
    jit([](const Tensor& x, const Tensor& s) { return batchNormTrain(x, s, s, 1e-5).y; }, on)(
        Array::zeros(DType::f32, {0, 3, 8, 8}), scale);
  });
  EXPECT_NE(noValues.find("EmptyTensorTest.cpp"), std::string::npos) << noValues;
  EXPECT_NE(noValues.find("holds no value per channel"), std::string::npos) << noValues;
  const std::string emptyAxis = errorOf([&] { jit([](const Tensor& x) { return argmax(x, 0); }, on)(rows0); });
  EXPECT_NE(emptyAxis.find("EmptyTensorTest.cpp"), std::string::npos) << emptyAxis;
  EXPECT_NE(emptyAxis.find("an empty axis has no largest element"), std::string::npos) << emptyAxis;
}

TEST_P(EmptyTensorTest, GradientsNormalizationsAndCollectivesOfNothing) {
  const JitOptions on{.devices = GetParam()};
  // An empty batch through a 16-channel convolution (the CPU's blocked layout), its batch norm in
  // inference, its group norm, and the gradients of a matmul with M = 0 (zeros) and K = 0 (empty).
  auto f = jit([](const Tensor& x, const Tensor& k, const Tensor& g, const Tensor& a, const Tensor& b) {
    Tensor y = batchNormInfer(relu(conv2d(x, k)), g, g, g, g, 1e-5);
    Tensor dx = grad([&](const Tensor& xx) { return sum(conv2d(xx, k), {0, 1, 2, 3}); })(x);
    Tensor db = grad([&](const Tensor& bb) { return sum(matmul(a, bb), {0, 1}); })(b);
    return std::tuple{y, groupNorm(x, 4, g, g), dx, db};
  }, on);
  auto [y, grouped, dx, db] = f(Array::zeros(DType::f32, {0, 16, 6, 6}), ramp({16, 16, 3, 3}, -1, 0.001),
                                ramp({16}, 1, 0), Array::zeros(DType::f32, {0, 5}), ramp({5, 4}, 0, 1));
  EXPECT_EQ(y.array().shape, (Shape{0, 16, 4, 4}));
  EXPECT_EQ(grouped.array().shape, (Shape{0, 16, 6, 6}));
  EXPECT_EQ(dx.array().shape, (Shape{0, 16, 6, 6}));
  EXPECT_EQ(values(db), std::vector<double>(20, 0.0));
  // Collectives of empty operands still meet and return empty results (replicated: one copy).
  auto reduced = pmap([](const Tensor& x) { return std::tuple{psum(x, "batch"), allGather(x, "batch")}; },
                      {.devices = std::string(GetParam()) + ":2"})(Array::zeros(DType::f32, {2, 3, 0}));
  EXPECT_EQ(std::get<0>(reduced).array().shape, (Shape{3, 0}));
  EXPECT_EQ(std::get<1>(reduced).array().shape, (Shape{2, 3, 0}));
}

// Across processes process 0 chooses the kernels before the first step, calling the CPU's choice
// on each step directly (Executor::chooseKernels): an empty batch's convolution has nothing to
// time, where the timing's sliced variants divided by it (SIGFPE).
TEST(EmptyTensorChoiceTest, ChoosingAVariantForAConvolutionOverNothingTimesNothing) {
  runtime::Step step{"conv2d", {}, {}, {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}},
                     "EmptyTensorTest"};
  runtime::decodeAttributes(step);
  Array x = Array::zeros(DType::f32, {0, 16, 8, 8}), w = ramp({16, 16, 3, 3}, -1, 0.001), y = Array::zeros(DType::f32, {0, 16, 8, 8});
  const std::vector<runtime::TensorView> in{{x.data(), x.dtype, x.shape, ""}, {w.data(), w.dtype, w.shape, ""}},
      out{{y.data(), y.dtype, y.shape, ""}};
  std::shared_ptr<void> cache;
  runtime::KernelCall call{step, in, out, cache};
  runtime::cpu::chooseCpuVariant(call, nullptr);
  EXPECT_EQ(cache, nullptr) << "no variant ran";
}

// The GPU-like backends' own empty sums (runtime/kernels/EmptySums.h, which the cuda backend runs
// before cuDNN and cuBLAS refuse the zero extents, and sim in their place): with plain and
// channels-last activations, in f32 and in bf16, a convolution of 0 input channels is its bias
// through the fused relu, and a matmul with K = 0 its bias rows.
void expectDeviceEmptySums(const std::string& devices) {
  const Array b = ramp({16}, -3, 0.5);  // exact in bf16
  for (bool channelsLast : {false, true}) {
    if (channelsLast) ::setenv("SPMD_CHANNELS_LAST", "1", 1);  // read when a function first compiles
    for (DType dtype : {DType::f32, DType::bf16}) {
      const std::string which = std::string(dtypeName(dtype)) + (channelsLast ? " nhwc" : " nchw");
      auto f = jit([dtype](const Tensor& x, const Tensor& k, const Tensor& bias) {
        return cast(relu(conv2d(cast(x, dtype), cast(k, dtype), cast(bias, dtype), {.padding = {1, 1}})), DType::f32);
      }, {.devices = devices});
      const std::vector<double> got =
          values(f(Array::zeros(DType::f32, {2, 0, 5, 5}), Array::zeros(DType::f32, {16, 0, 3, 3}), b));
      ASSERT_EQ(got.size(), 2u * 16 * 25) << which;
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], std::max(0.0, -3 + 0.5 * double((i / 25) % 16))) << which << " element " << i;
      auto rows = jit([dtype](const Tensor& a, const Tensor& m, const Tensor& bias) {
        return cast(matmul(cast(a, dtype), cast(m, dtype), cast(bias, dtype)), DType::f32);
      }, {.devices = devices});
      EXPECT_EQ(values(rows(Array::zeros(DType::f32, {2, 0}), Array::zeros(DType::f32, {0, 3}), ramp({3}, 1, 1))),
                (std::vector<double>{1, 2, 3, 1, 2, 3})) << which;
    }
    ::unsetenv("SPMD_CHANNELS_LAST");
  }
}

TEST(EmptyTensorDeviceTest, OnSimTheEmptySumIsTheBias) { expectDeviceEmptySums("sim"); }

// The same on a GPU (scripts/gpu_bundle.sh runs it; written without one: none was lent).
TEST(EmptyTensorDeviceTest, OnAGpuTheEmptySumIsTheBias) {
  std::string why;
  if (runtime::availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU: " << why;
  expectDeviceEmptySums("cuda:0");
}

INSTANTIATE_TEST_SUITE_P(Backends, EmptyTensorTest, ::testing::Values("cpu", "sim"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
}  // namespace spmd
