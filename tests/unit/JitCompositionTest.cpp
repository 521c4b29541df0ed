// Jitted functions composed: one called while another function is traced joins that trace (jax's
// jit inside jit), forward, under grad and under pmap; a traced value kept past its function is
// refused by name when a later trace uses it (the later trace may be made at the finished one's
// address, where a pointer check took it for its own and MLIR read a freed value).
#include <gtest/gtest.h>

#include <cmath>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;
using spmd::testing::randomArray;

TEST(JitCompositionTest, AJittedFunctionCalledWhileTracingJoinsTheTrace) {
  auto inner = jit([](const Tensor& x, const Tree& p, double scale) { return tanh(x * p.at("w")) * scale; });
  auto outer = jit([&](const Tensor& x, const Tree& p) { return inner(x, p, 3.0) + 1.0; });
  const Array x = randomArray(DType::f32, {4, 5}, 1), w = randomArray(DType::f32, {5}, 2);
  Tree p;
  p.set("w", w);
  const Array got = outer(x, p).array();
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_FLOAT_EQ(got.values<float>()[i], std::tanh(x.values<float>()[i] * w.values<float>()[i % 5]) * 3 + 1) << i;
  EXPECT_EQ(inner.compileCount(), 0) << "inlined, never compiled on its own";
  EXPECT_EQ(outer.compileCount(), 1);
  // On its own it compiles and gives the inner part's values.
  const Array alone = inner(x, p, 3.0).array();
  EXPECT_FLOAT_EQ(alone.values<float>()[7], got.values<float>()[7] - 1);
  EXPECT_EQ(inner.compileCount(), 1);

  // Under grad: d/dw sum(3 tanh(x w)) = sum over rows of 3 x (1 - tanh^2).
  auto gradient = jit([&](const Tensor& v, const Tree& q) {
    return grad([&](const Tree& r) { return sum(inner(v, r, 3.0), {0, 1}); })(q).at("w");
  });
  const Array g = gradient(x, p).array();
  for (int64_t j = 0; j < 5; ++j) {
    double expected = 0;
    for (int64_t i = 0; i < 4; ++i) {
      const double xv = x.values<float>()[i * 5 + j], t = std::tanh(xv * w.values<float>()[j]);
      expected += 3 * xv * (1 - t * t);
    }
    EXPECT_NEAR(g.values<float>()[j], expected, 1e-5) << j;
  }

  // Under pmap: a collective in the inner function reduces over the enclosing pmap's axis.
  auto centered = jit([](const Tensor& v) { return v - pmean(v, "batch"); });
  auto mapped = pmap([&](const Tensor& v) { return centered(v); }, {.outAxes = {Axis(0)}, .devices = "cpu:2"});
  const Array pair = Array::of<float>({2, 2}, std::vector<float>{1, 2, 5, 10});
  const Array out = mapped(pair).array();
  const std::span<const float> v = out.values<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.end()), (std::vector<float>{-2, -4, 2, 4}));
}

TEST(JitCompositionTest, ATracedValueKeptPastItsFunctionIsRefusedByName) {
  Tensor kept;
  auto leak = jit([&](const Tensor& x) {
    kept = x * 2.0;
    return x;
  });
  leak(Array::zeros(DType::f32, {3}));
  // Traces made one after another may share an address; each has its own serial number.
  auto use = jit([&](const Tensor& x) { return x + kept; });
  const std::string message = errorOf([&] { use(Array::zeros(DType::f32, {3})); });
  EXPECT_NE(message.find("JitCompositionTest.cpp"), std::string::npos) << message;
  EXPECT_NE(message.find("tensor f32[3] belongs to another trace (a traced value escaped its spmd::jit function"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("dominate"), std::string::npos) << "not MLIR's verifier: " << message;
  EXPECT_NE(errorOf([&] { kept.array(); }).find("is traced inside spmd::jit and has no data yet"), std::string::npos);
}

}  // namespace
}  // namespace spmd
