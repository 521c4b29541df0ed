// The DSL's tensor operators: each computes what its function does (broadcasting included), and
// a shape error names the line where the expression is written, not the operator's header.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace spmd
