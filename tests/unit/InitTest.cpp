// Initializers: the normal quantile against the CDF, the truncated normal against its own
// distribution (Kolmogorov-Smirnov, far tails included), variance scaling's variances and bounds
// by jax's and torch's formulas, and bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "frontend/Init.h"
#include "tests/unit/TestUtil.h"

namespace spmd {
namespace {

double cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

std::vector<double> drawn(const Initializer& init, const Shape& shape, uint64_t seed = 7) {
  Rng rng(seed);
  Array a = init(rng, shape);
  EXPECT_EQ(a.dtype, DType::f32);
  EXPECT_EQ(a.shape, shape);
  std::vector<double> values;
  for (float v : a.values<float>()) values.push_back(v);
  return values;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

double variance(const std::vector<double>& v) {
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size());
}

// The largest gap between the sample's CDF and `F` (the Kolmogorov-Smirnov statistic).
template <typename F>
double ksDistance(std::vector<double> v, F&& distribution) {
  std::sort(v.begin(), v.end());
  double worst = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double f = distribution(v[i]);
    worst = std::max({worst, std::abs(f - double(i) / double(v.size())), std::abs(double(i + 1) / double(v.size()) - f)});
  }
  return worst;
}

TEST(InitTest, NormalQuantileInvertsTheCdfToDoublePrecision) {
  for (double p : {1e-300, 1e-100, 1e-20, 1e-10, 1e-3, 0.02, 0.02425, 0.03, 0.2, 0.5, 0.7, 0.97, 0.99}) {
    const double x = normalQuantile(p);
    EXPECT_NEAR(cdf(x) / p, 1.0, 1e-13) << "p = " << p << ", x = " << x;
  }
  for (double q : {1e-15, 1e-10, 1e-4, 0.02}) {  // the upper tail, at p = 1 - q rounded
    const double p = 1 - q, tail = 1 - p;           // tail: p's own distance from 1, exact
    const double x = normalQuantile(p);
    EXPECT_NEAR(cdf(-x) / tail, 1.0, 1e-13) << "1 - p = " << tail << ", x = " << x;
    EXPECT_NEAR(x / -normalQuantile(tail), 1.0, 1e-14);  // symmetric
  }
  EXPECT_EQ(normalQuantile(0.5), 0.0);
  EXPECT_NEAR(normalQuantile(0.975), 1.959963984540054, 1e-14);
  EXPECT_EQ(normalQuantile(0.0), -INFINITY);
  EXPECT_EQ(normalQuantile(1.0), INFINITY);
  for (double bad : {-0.1, 1.5, double(NAN)})
    EXPECT_NE(testing::errorOf([&] { normalQuantile(bad); }).find("is not a probability in [0, 1]"), std::string::npos);
}

TEST(InitTest, TruncatedNormalFollowsItsDistributionFarTailsIncluded) {
  struct Case {
    double stddev, lower, upper;
  };
  for (const Case c : {Case{1.0, -2, 2}, Case{0.02, -2, 2}, Case{1.0, -1, 3}, Case{0.5, 5, 6}, Case{2.0, -7, -6},
                       Case{1.0, -INFINITY, -3}, Case{1.0, 30, INFINITY}}) {
    const std::vector<double> v = drawn(init::truncatedNormal(c.stddev, c.lower, c.upper), {200, 100});
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*lo, float(c.lower * c.stddev));
    EXPECT_LE(*hi, float(c.upper * c.stddev));
    // In f32 a far tail's values are coarse (a grid of ~5e-7 at 6): compare on the standard scale.
    const double from = cdf(c.lower), mass = cdf(c.upper) - from;
    const double upperMass = cdf(-c.lower) - cdf(-c.upper);  // the same, mirrored, for intervals above 0
    const double d = ksDistance(v, [&](double x) {
      const double z = x / c.stddev;
      return c.lower >= 0 ? 1 - (cdf(-z) - cdf(-c.upper)) / upperMass : (cdf(z) - from) / mass;
    });
    // 1.63 / sqrt(n): the 1% level of the statistic; a wrong interval or a lost tail gives ~1.
    EXPECT_LT(d, 1.63 / std::sqrt(double(v.size()))) << c.lower << ".." << c.upper << " x " << c.stddev;
  }
  // Cut at +-2 deviations, the deviation is the constant varianceScaling corrects by.
  EXPECT_NEAR(std::sqrt(variance(drawn(init::truncatedNormal(1.0), {400, 500}))), 0.87962566103423978, 2e-3);
}

TEST(InitTest, VarianceScalingGivesJaxsAndTorchsVariancesAndBounds) {
  const Shape conv = {64, 32, 3, 3};  // fanIn 288, fanOut 576
  const double fanIn = 288, fanOut = 576, fanAvg = (fanIn + fanOut) / 2;
  struct Case {
    const char* name;
    Initializer init;
    double variance, bound;  // bound: the largest |value| the formula allows
  };
  const double cut = 2 / 0.87962566103423978;  // a truncated normal's bound per deviation
  const std::vector<Case> cases = {
      {"lecunNormal", init::lecunNormal(), 1 / fanIn, cut * std::sqrt(1 / fanIn)},
      {"lecunUniform", init::lecunUniform(), 1 / fanIn, std::sqrt(3 / fanIn)},
      {"heNormal", init::heNormal(), 2 / fanIn, cut * std::sqrt(2 / fanIn)},
      {"heUniform (kaiming_uniform_)", init::heUniform(), 2 / fanIn, std::sqrt(6 / fanIn)},
      {"glorotNormal", init::glorotNormal(), 2 / (fanIn + fanOut), cut * std::sqrt(1 / fanAvg)},
      {"glorotUniform (xavier_uniform_)", init::glorotUniform(), 2 / (fanIn + fanOut), std::sqrt(6 / (fanIn + fanOut))},
      {"kaimingNormal", init::kaimingNormal(), 2 / fanIn, INFINITY},
      {"fanOut, normal", init::varianceScaling(3.0, init::FanMode::fanOut, init::Distribution::normal), 3 / fanOut,
       INFINITY},
      {"torch's Conv2d default", init::varianceScaling(1.0 / 3, init::FanMode::fanIn, init::Distribution::uniform),
       1 / (3 * fanIn), 1 / std::sqrt(fanIn)},
  };
  for (const Case& c : cases) {
    const std::vector<double> v = drawn(c.init, conv);
    const double n = double(v.size());
    EXPECT_NEAR(variance(v) / c.variance, 1.0, 0.04) << c.name;  // sampling error ~1.2% at n = 18432
    EXPECT_LT(std::abs(mean(v)), 4 * std::sqrt(c.variance / n)) << c.name;
    double largest = 0;
    for (double x : v) largest = std::max(largest, std::abs(x));
    EXPECT_LE(largest, float(c.bound)) << c.name;
    if (std::isfinite(c.bound)) {
      EXPECT_GT(largest, 0.99 * c.bound) << c.name << ": the range is used to its ends";
    }
  }
  // A Linear weight [out, in]: the fans are its two sizes.
  EXPECT_NEAR(variance(drawn(init::glorotUniform(), {300, 100})) * 200, 1.0, 0.04);
  // One seed, the same numbers; another seed, others.
  EXPECT_EQ(drawn(init::lecunNormal(), conv, 3), drawn(init::lecunNormal(), conv, 3));
  EXPECT_NE(drawn(init::lecunNormal(), conv, 3), drawn(init::lecunNormal(), conv, 4));
}

TEST(InitTest, BadArgumentsAreRefusedSayingWhy) {
  Rng rng(1);
  auto says = [](const std::string& error, const std::string& part) {
    EXPECT_NE(error.find(part), std::string::npos) << error;
  };
  says(testing::errorOf([&] { init::lecunNormal()(rng, {10}); }), "[10] has none");
  says(testing::errorOf([&] { init::kaimingNormal()(rng, {}); }), "of rank 2 or more");
  says(testing::errorOf([&] { init::truncatedNormal(1.0, 2, 1); }), "lower < upper");
  says(testing::errorOf([&] { init::truncatedNormal(1.0, 0, NAN); }), "lower < upper");
  says(testing::errorOf([&] { init::truncatedNormal(0.0); }), "positive and finite");
  says(testing::errorOf([&] { init::truncatedNormal(1.0, 40, 41); }), "holds no probability");
  says(testing::errorOf([&] { init::truncatedNormal(1.0, -41, -40); }), "holds no probability");
  says(testing::errorOf([&] {
         init::varianceScaling(-1.0, init::FanMode::fanIn, init::Distribution::normal);
       }),
       "scale must be positive");
  EXPECT_EQ(init::heNormal()(rng, {0, 5}).numel(), 0);  // nothing to draw: no fans needed
}

}  // namespace
}  // namespace spmd
