// The DSL's tensor operators: each computes what its function does (broadcasting included), and
// a shape error names the line where the expression is written, not the operator's header.
#include <gtest/gtest.h>

#include <limits>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

std::vector<float> values(const Tensor& t) {
  auto v = t.array().values<float>();
  return {v.begin(), v.end()};
}

TEST(OperatorTest, OperatorsComputeTheirFunctions) {
  Array a = Array::of<float>({2, 2}, std::vector<float>{1, 2, 3, 4});
  Array b = Array::of<float>({2}, std::vector<float>{2, 8});
  auto f = jit([](const Tensor& x, const Tensor& y) {
    return std::tuple{x + y, x - y, x * y, x / y, -x, x + 1.0, x - 1.0, x * 2.0, x / 4.0, 10.0 - x, 8.0 / x};
  });
  auto [sum, difference, product, quotient, negated, plus1, minus1, twice, quarter, tenMinus, eightOver] = f(a, b);
  EXPECT_EQ(values(sum), (std::vector<float>{3, 10, 5, 12}));
  EXPECT_EQ(values(difference), (std::vector<float>{-1, -6, 1, -4}));
  EXPECT_EQ(values(product), (std::vector<float>{2, 16, 6, 32}));
  EXPECT_EQ(values(quotient), (std::vector<float>{0.5f, 0.25f, 1.5f, 0.5f}));
  EXPECT_EQ(values(negated), (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(values(plus1), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(values(minus1), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(values(twice), (std::vector<float>{2, 4, 6, 8}));
  EXPECT_EQ(values(quarter), (std::vector<float>{0.25f, 0.5f, 0.75f, 1}));
  EXPECT_EQ(values(tenMinus), (std::vector<float>{9, 8, 7, 6}));
  EXPECT_EQ(values(eightOver), (std::vector<float>{8, 4, 8.0f / 3, 2}));
}

TEST(OperatorTest, AShapeErrorNamesTheExpressionsLine) {
  Array a = Array::zeros(DType::f32, {2, 3}), b = Array::zeros(DType::f32, {4});
  auto f = jit([](const Tensor& x, const Tensor& y) {
    return x * y;  // the line the error must name
  });
  int line = __LINE__ - 2;
  std::string error = spmd::testing::errorOf([&] { f(a, b); });
  EXPECT_NE(error.find("OperatorTest.cpp:" + std::to_string(line)), std::string::npos) << error;
  EXPECT_NE(error.find("do not broadcast"), std::string::npos) << error;
}

TEST(OperatorTest, CastRoundsTowardZeroSaturatesAndCarriesGradientsBack) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  Array x = Array::of<float>({7}, std::vector<float>{1.7f, -1.7f, nan, 3e9f, -3e9f, inf, 0.5f});
  for (const char* devices : {"cpu", "sim"}) {
    auto toInt = jit([](const Tensor& v) { return cast(v, DType::i32); }, {.devices = devices});
    Array result = toInt(x).array();
    auto got = result.values<int32_t>();
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()),
              (std::vector<int32_t>{1, -1, 0, 2147483647, -2147483647 - 1, 2147483647, 0}))
        << devices;
  }
  // d/dx sum(cast(x, f64) * w) = cast(w, f32), exactly; i32 -> f32 takes no gradient.
  Tree p;
  p.set("x", Array::of<float>({3}, std::vector<float>{0.25f, -2.0f, 7.0f}));
  Array w = Array::of<double>({3}, std::vector<double>{0.1, -3.0, 1e-3});
  auto grad = jit([&](const Tree& q) {
    return value_and_grad([&](const Tree& r) { return sum(mul(cast(r.at("x"), DType::f64), Tensor(w)), {0}); })(q);
  });
  auto [loss, grads] = grad(p);
  EXPECT_NEAR(loss.array().values<double>()[0], 0.025 + 6.0 + 0.007, 1e-12);
  std::vector<float> want = {0.1f, -3.0f, 1e-3f};
  Array gradient = grads.at("x").array();
  auto g = gradient.values<float>();
  EXPECT_EQ(std::vector<float>(g.begin(), g.end()), want);
  auto labels = jit([](const Tensor& ids) { return sum(cast(ids, DType::f32), {0}); });
  EXPECT_EQ(labels(Array::of<int32_t>({3}, std::vector<int32_t>{4, -1, 2})).array().values<float>()[0], 5.0f);
}

}  // namespace
}  // namespace spmd
