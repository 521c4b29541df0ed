// The volumetric ops beyond PyTorch parity (TorchReferenceTest): convTranspose3d is conv3d's
// adjoint, a 3-D network trains under pmap with the same values on cpu and sim, the layers give
// the functions' bits, and bad options are errors at the caller's line naming the dimension.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using testing::errorOf;
using testing::randomArray;
using testing::valueAt;

double dot(const Array& a, const Array& b) {
  double total = 0;
  for (int64_t i = 0; i < a.numel(); ++i) total += valueAt(a, i) * valueAt(b, i);
  return total;
}

// <convTranspose3d(v, w), x> = <v, conv3d(x, w)> in f64, with strides, padding, dilation and
// groups, the output padding picked so that the transposed result has x's shape again.
TEST(VolumeTest, TransposedConvolutionIsTheConvolutionsAdjoint) {
  struct Case {
    Shape x, w;
    Conv3dOptions options;
  };
  const std::vector<Case> cases = {{{2, 3, 5, 6, 4}, {4, 3, 3, 2, 3}, {}},
                                   {{1, 4, 8, 7, 6}, {6, 2, 3, 3, 2}, {{2, 3, 1}, {1, 0, 1}, {2, 1, 2}, 2}},
                                   {{2, 2, 7, 5, 5}, {2, 2, 2, 3, 3}, {{3, 2, 2}, {1, 1, 0}, {1, 1, 1}, 1}}};
  uint64_t seed = 11;
  for (const Case& c : cases) {
    const Conv3dOptions& o = c.options;
    const Array x = randomArray(DType::f64, c.x, seed++), w = randomArray(DType::f64, c.w, seed++);
    const Array y = jit([&](const Tensor& t, const Tensor& f) { return conv3d(t, f, {}, o); })(x, w).array();
    const Array v = randomArray(DType::f64, y.shape, seed++);
    ConvTranspose3dOptions back{o.stride, o.padding, {0, 0, 0}, o.dilation, o.groups};
    for (size_t d = 0; d < 3; ++d)
      back.outputPadding[d] = (c.x[d + 2] + 2 * o.padding[d] - o.dilation[d] * (c.w[d + 2] - 1) - 1) % o.stride[d];
    const Array u = jit([&](const Tensor& t, const Tensor& f) { return convTranspose3d(t, f, {}, back); })(v, w).array();
    ASSERT_EQ(u.shape, x.shape) << shapeString(c.x);
    const double left = dot(u, x), right = dot(v, y);
    EXPECT_NEAR(left, right, 1e-12 * std::abs(right)) << shapeString(c.x);
  }
}

// A 3-D encoder-decoder (conv3d, maxPool3d, convTranspose3d, avgPool3d) differentiated under
// pmap over two replicas: sim's kernels give cpu's values in f64, and the gradients are the
// whole batch's on one device.
TEST(VolumeTest, AVolumeNetworkTrainsUnderPmapOnCpuAndSim) {
  auto loss = [](const Tree& p, const Tensor& x) {
    Tensor h = relu(conv3d(x, p.at("down"), p.at("down_bias"), {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1}));
    h = maxPool3d(h, {.window = {2, 2, 2}});
    h = convTranspose3d(h, p.at("up"), {}, {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1});
    h = avgPool3d(h, {.window = {3, 3, 3}, .stride = {2, 2, 2}, .padding = {1, 1, 1}, .countIncludePad = false});
    return mean(h * h, {0, 1, 2, 3, 4});
  };
  Tree params;
  params.set("down", randomArray(DType::f64, {4, 2, 3, 3, 3}, 21));
  params.set("down_bias", randomArray(DType::f64, {4}, 22));
  params.set("up", randomArray(DType::f64, {4, 3, 3, 3, 3}, 23));
  const Array x = randomArray(DType::f64, {4, 2, 6, 6, 6}, 24);
  auto whole = jit([&](const Tree& p, const Tensor& t) { return value_and_grad([&](const Tree& q) { return loss(q, t); })(p); });
  auto [total, grads] = whole(params, x);
  for (const char* devices : {"cpu:2", "sim:2"}) {
    SCOPED_TRACE(devices);
    auto step = pmap([&](const Tree& p, const Tensor& t) { return value_and_grad([&](const Tree& q) { return loss(q, t); })(p); },
                     {.inAxes = {replicated, split}, .devices = devices});
    auto [l, g] = step(params, x);
    EXPECT_NEAR(valueAt(l.array(), 0), valueAt(total.array(), 0), 1e-12 * std::abs(valueAt(total.array(), 0)));
    for (const auto& [name, leaf] : grads) {
      const Array expected = leaf.array();
      testing::expectClose(g.at(name).array(), expected, 1e-11, 1e-14, std::string(devices) + " " + name);
    }
  }
}

// The layers hold torch's parameter shapes and give the functions' bits.
TEST(VolumeTest, LayersGiveTheFunctionsBits) {
  nn::ConvTranspose3d up("up", {.in = 4, .out = 6, .kernel = 3, .stride = 2, .padding = 1, .outputPadding = 1, .groups = 2});
  auto [params, state] = up.initialize(3);
  EXPECT_EQ(params.at("up.weight").shape(), (Shape{4, 3, 3, 3, 3}));
  EXPECT_EQ(params.at("up.bias").shape(), (Shape{6}));
  const Array x = randomArray(DType::f32, {2, 4, 3, 4, 5}, 31);
  const Array byLayer = jit([&](const Tree& p, const Tensor& t) { return up.apply(p, state, t, true).first; })(params, x).array();
  const Array byOp = jit([](const Tensor& t, const Tensor& w, const Tensor& b) {
                       return convTranspose3d(t, w, b, {{2, 2, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 2});
                     })(x, params.at("up.weight").array(), params.at("up.bias").array())
                         .array();
  EXPECT_EQ(byOp.shape, (Shape{2, 6, 6, 8, 10}));
  testing::expectSameBits(byLayer, byOp, "nn::ConvTranspose3d");
  const Pool3dOptions options{.window = {2, 3, 3}, .stride = {2, 2, 2}, .padding = {0, 1, 1}};
  nn::MaxPool3d maxLayer("max", options);
  nn::AvgPool3d avgLayer("avg", options);
  const Array volume = randomArray(DType::f32, {2, 3, 6, 7, 8}, 32);
  for (bool max : {true, false}) {
    const nn::Module& layer = max ? static_cast<const nn::Module&>(maxLayer) : avgLayer;
    auto [none, noState] = layer.initialize(1);
    EXPECT_EQ(none.size(), 0u);
    const Array a = jit([&](const Tensor& t) { return layer.apply(none, noState, t, true).first; })(volume).array();
    const Array b = jit([&](const Tensor& t) { return max ? maxPool3d(t, options) : avgPool3d(t, options); })(volume).array();
    EXPECT_EQ(b.shape, (Shape{2, 3, 3, 4, 4}));
    testing::expectSameBits(a, b, max ? "nn::MaxPool3d" : "nn::AvgPool3d");
  }
  EXPECT_NE(errorOf([] { nn::ConvTranspose3d("bad", {.in = 4, .out = 6, .kernel = 3, .stride = 2, .outputPadding = 2}); })
                .find("nn::ConvTranspose3d 'bad': outputPadding (2) must be non-negative and smaller than the stride (2)"),
            std::string::npos);
}

// Bad options: the caller's line, the op, the dimension and what to change.
TEST(VolumeTest, BadOptionsAreErrorsAtTheCallersLine) {
  const Array x = randomArray(DType::f32, {1, 2, 4, 5, 5}, 41);
  auto pooled = [&](Pool3dOptions options) {
    return errorOf([&] { jit([&](const Tensor& t) { return maxPool3d(t, options); })(x); });
  };
  auto expectError = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find("VolumeTest.cpp:"), std::string::npos) << message;
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  expectError(pooled({.window = {2, 2, 2}, .padding = {2, 0, 0}}),
              "spmd::maxPool3d: padding 2 along the depth must be smaller than the window's span there (2 taps: 2)");
  expectError(pooled({.window = {2, 3, 2}, .dilation = {1, 3, 1}}),
              "spmd::maxPool3d: the window's 3 taps along the height, dilated by 3, span 7, more than x's height 5 "
              "with padding 0 on each side");
  expectError(pooled({.window = {2, 2}}), "window, stride and dilation must be three positive integers");
  expectError(pooled({.window = {2, 2, 2}, .stride = {1, 1, 1}, .padding = {0, 0, 1}, .dilation = {1, 1, 6}}),
              "window 0 along the width holds only padding");
  expectError(errorOf([&] { jit([&](const Tensor& t) { return avgPool3d(t); })(randomArray(DType::f32, {2, 4, 4, 4}, 1)); }),
              "spmd::avgPool3d: x must be [N, C, D, H, W], got f32[2, 4, 4, 4]");
  auto transposed = [&](Shape w, ConvTranspose3dOptions options, Shape bias = {}) {
    return errorOf([&] {
      jit([&](const Tensor& t, const Tensor& f, const Tensor& b) {
        return convTranspose3d(t, f, bias.empty() ? Tensor() : b, options);
      })(x, randomArray(DType::f32, w, 2), randomArray(DType::f32, bias.empty() ? Shape{1} : bias, 3));
    });
  };
  expectError(transposed({2, 3, 3, 3, 3}, {.stride = {2, 1, 1}, .outputPadding = {0, 1, 0}}),
              "spmd::convTranspose3d: outputPadding [0, 1, 0] must be smaller than the stride [2, 1, 1]");
  expectError(transposed({3, 3, 3, 3, 3}, {}), "filter f32[3, 3, 3, 3, 3] must have x's 2 input channels first");
  expectError(transposed({2, 3, 3, 3, 3}, {.groups = 3}), "groups 3 must be positive and divide x's 2 channels");
  expectError(transposed({2, 3, 1, 1, 1}, {.padding = {2, 0, 0}}), "leaves no output along the depth");
  expectError(transposed({2, 3, 3, 3, 3}, {}, {4}), "bias must be [3] (one per output channel), got f32[4]");
}

}  // namespace
}  // namespace spmd
