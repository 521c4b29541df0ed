// Randomness: Philox4x32-10 against the Random123 known-answer vectors; uniform numbers in
// [0, 1) with the right moments; normal numbers as their definition gives them, with the normal
// distribution; truncated normals inside their bounds with theirs; gamma, beta and dirichlet draws
// with theirs; Bernoulli masks and categorical draws at their probabilities; traced and host key
// derivation agree; dropout under pmap gives each replica its own mask, a function of (key,
// global replica index, step) alone, the same bits on every run and device count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/base/Philox.h"

namespace spmd {
namespace {

namespace philox = runtime::philox;
using spmd::testing::errorOf;

TEST(RandomTest, PhiloxMatchesRandom123KnownAnswers) {
  struct Vector { philox::Words counter; uint32_t k0, k1; philox::Words want; };
  for (const Vector& v : {Vector{{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
                          Vector{{{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u, {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
                          Vector{{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0,
                                 {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}}}) {
    philox::Words got = philox::philox4x32(v.counter, v.k0, v.k1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.w[i], v.want.w[i]) << "word " << i;
  }
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.array().numel(); ++i) out.push_back(spmd::testing::valueAt(t.array(), i));
  return out;
}

TEST(RandomTest, UniformIsInTheUnitIntervalWithTheRightMoments) {
  for (DType dtype : {DType::f32, DType::f64}) {
    auto draw = jit([dtype](const Tensor& key) { return random::uniform(key, {200, 500}, dtype); });
    std::vector<double> u = values(draw(random::key(2024)));
    double sum = 0, squares = 0;
    for (double v : u) {
      ASSERT_TRUE(v >= 0 && v < 1) << v;
      sum += v;
      squares += v * v;
    }
    double mean = sum / double(u.size()), variance = squares / double(u.size()) - mean * mean;
    EXPECT_NEAR(mean, 0.5, 0.005) << dtypeName(dtype);  // 5 sigma of 1e5 draws is 0.0046
    EXPECT_NEAR(variance, 1.0 / 12, 0.002) << dtypeName(dtype);
    EXPECT_EQ(u, values(draw(random::key(2024)))) << "same key, same numbers";
    EXPECT_NE(u, values(draw(random::key(2025))));
    // Element i depends only on the key and i: a smaller draw is a prefix of the larger.
    auto small = jit([dtype](const Tensor& key) { return random::uniform(key, {7}, dtype); });
    std::vector<double> prefix = values(small(random::key(2024)));
    EXPECT_EQ(prefix, std::vector<double>(u.begin(), u.begin() + 7));
  }
}

// Uniform number i of `key` in f32, from the generator's definition: word i % 4 of block i / 4,
// its top 24 bits over 2^24.
float uniformAt(const Array& key, int64_t i) {
  const uint32_t k0 = uint32_t(key.values<int32_t>()[0]), k1 = uint32_t(key.values<int32_t>()[1]);
  const uint32_t bits = philox::philox4x32(philox::Words{{uint32_t(i / 4), 0, 0, 0}}, k0, k1).w[i % 4];
  return float(double(bits >> 8) / 16777216.0);
}

TEST(RandomTest, NormalNumbersAreBoxMullersOnTwoUniformNumbersAndNormallyDistributed) {
  const Array key = random::key(31);
  const Shape shape = {301, 333};  // an odd count
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtypeName(dtype));
    auto draw = jit([&](const Tensor& k) { return random::normal(k, shape, dtype); });
    std::vector<double> z = values(draw(key));
    ASSERT_EQ(int64_t(z.size()), 301 * 333);
    if (dtype == DType::f32) {
      // Element i from uniform numbers 2i and 2i + 1, each step rounded to f32 as the kernels do.
      for (int64_t i = 0; i < 1000; ++i) {
        const float u = uniformAt(key, 2 * i), v = uniformAt(key, 2 * i + 1);
        const float radius = std::sqrt(std::log(1.0f - u) * -2.0f);
        const float want = radius * std::cos(v * float(6.283185307179586476925));
        ASSERT_EQ(z[size_t(i)], double(want)) << "element " << i;
      }
    }
    // Moments (5 sigma of 1e5 draws: 0.016 for the mean, 0.022 for the variance, 0.12 for the
    // fourth moment) and the Kolmogorov-Smirnov distance to the normal distribution, under its
    // 0.1% critical value 1.95 / sqrt(n).
    double sum = 0, squares = 0, fourth = 0;
    for (double v : z) sum += v, squares += v * v, fourth += v * v * v * v;
    const double n = double(z.size()), mean = sum / n;
    EXPECT_NEAR(mean, 0, 0.016);
    EXPECT_NEAR(squares / n - mean * mean, 1, 0.022);
    EXPECT_NEAR(fourth / n, 3, 0.12);
    std::vector<double> sorted = z;
    std::sort(sorted.begin(), sorted.end());
    double distance = 0;
    for (size_t i = 0; i < sorted.size(); ++i) {
      const double cdf = 0.5 * std::erfc(-sorted[i] / std::sqrt(2.0));
      distance = std::max({distance, std::fabs(cdf - double(i) / n), std::fabs(cdf - double(i + 1) / n)});
    }
    EXPECT_LT(distance, 1.95 / std::sqrt(n));
    EXPECT_LT(std::fabs(sorted.front()), dtype == DType::f32 ? 5.8 : 8.6);
    EXPECT_LT(sorted.back(), dtype == DType::f32 ? 5.8 : 8.6);
    // A smaller draw is a prefix of the larger one; sim gives the same bits; another key differs.
    auto small = jit([&](const Tensor& k) { return random::normal(k, {5}, dtype); });
    EXPECT_EQ(values(small(key)), std::vector<double>(z.begin(), z.begin() + 5));
    auto onSim = jit([&](const Tensor& k) { return random::normal(k, shape, dtype); }, {.devices = "sim"});
    EXPECT_EQ(values(onSim(key)), z) << "sim";
    EXPECT_NE(values(small(random::key(32))), values(small(key)));
  }
  auto bf16 = jit([](const Tensor& k) { return cast(random::normal(k, {1000}, DType::bf16), DType::f32); });
  for (double v : values(bf16(key))) ASSERT_TRUE(std::isfinite(v) && std::fabs(v) < 6) << v;
  // Reparameterized: the gradient of sum(mu + sigma * z) with respect to sigma is z.
  auto reparameterized = jit([](const Tensor& k, const Tensor& mu, const Tensor& sigma) {
    return value_and_grad([&](const Tensor& s) { return sum(add(mu, mul(s, random::normal(k, {4}))), {0}); })(sigma);
  });
  auto filled = [](float v) { return Array::of<float>({4}, std::vector<float>(4, v)); };
  auto [total, dSigma] = reparameterized(key, filled(0.5f), filled(2.0f));
  EXPECT_EQ(values(dSigma), values(jit([](const Tensor& k) { return random::normal(k, {4}); })(key)));
}

TEST(RandomTest, TruncatedNormalsFollowTheirDistributionInsideTheBounds) {
  const Array key = random::key(5);
  const double kRootHalf = 0.70710678118654752440;
  auto cdf = [&](double x) { return 0.5 * std::erfc(-x * kRootHalf); };
  struct Case {
    double lower, upper;
    DType dtype;
  };
  for (const Case c : {Case{-2, 2, DType::f32}, Case{-1, 3, DType::f32}, Case{-2, 2, DType::f64},
                       Case{5, 6, DType::f64}, Case{-INFINITY, -1.5, DType::f64}}) {
    SCOPED_TRACE(std::string(dtypeName(c.dtype)) + " [" + std::to_string(c.lower) + ", " + std::to_string(c.upper) + "]");
    auto draw = [&](const std::string& devices) {
      return values(jit([&](const Tensor& k) { return random::truncatedNormal(k, c.lower, c.upper, {200, 150}, c.dtype); },
                        {.devices = devices})(key));
    };
    const std::vector<double> drawn = draw("cpu");
    EXPECT_EQ(draw("sim"), drawn) << "sim";
    std::vector<double> z = drawn;
    std::sort(z.begin(), z.end());
    EXPECT_GT(z.front(), c.lower);  // the open interval, as jax
    EXPECT_LT(z.back(), c.upper);
    // Kolmogorov-Smirnov against the truncated distribution, under its 0.1% critical value.
    const double n = double(z.size()), from = cdf(c.lower), mass = cdf(c.upper) - from;
    double distance = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      const double f = (cdf(z[i]) - from) / mass;
      distance = std::max({distance, std::fabs(f - double(i) / n), std::fabs(f - double(i + 1) / n)});
    }
    EXPECT_LT(distance, 1.95 / std::sqrt(n));
  }
  // Where the drawn dtype's grid near +-1 cannot follow the tail: refused, saying what to do.
  const std::string tail = errorOf([&] {
    jit([](const Tensor& k) { return random::truncatedNormal(k, 5, 6, {4}); })(key);
  });
  EXPECT_NE(tail.find("RandomTest.cpp"), std::string::npos) << tail;
  EXPECT_NE(tail.find("in f32 the uniform numbers this draws through erfinv take only"), std::string::npos) << tail;
  EXPECT_NE(tail.find("spmd::init::truncatedNormal"), std::string::npos) << tail;
  const std::string order = errorOf([&] {
    jit([](const Tensor& k) { return random::truncatedNormal(k, 1, -1, {4}); })(key);
  });
  EXPECT_NE(order.find("the bounds must satisfy lower < upper"), std::string::npos) << order;
}

// The Kolmogorov-Smirnov distance of draws from a distribution with the given CDF.
template <typename Cdf>
double ksDistance(std::vector<double> x, Cdf cdf) {
  std::sort(x.begin(), x.end());
  const double n = double(x.size());
  double distance = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = cdf(x[i]);
    distance = std::max({distance, std::fabs(f - double(i) / n), std::fabs(f - double(i + 1) / n)});
  }
  return distance;
}

// The regularized lower incomplete gamma function P(a, x), gamma(a)'s CDF: its power series below
// x = a + 1, 1 minus the continued fraction of Q above (Lentz's evaluation).
double gammaCdf(double a, double x) {
  if (x <= 0) return 0;
  const double lead = std::exp(a * std::log(x) - x - std::lgamma(a));
  if (x < a + 1) {
    double term = 1 / a, total = term;
    for (int k = 1; k < 10000 && term > 1e-17 * total; ++k) total += term *= x / (a + k);
    return lead * total;
  }
  const double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = 1 / (std::fabs(d) < kTiny ? kTiny : d);
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    h *= d * c;
    if (std::fabs(d * c - 1) < 1e-16) break;
  }
  return 1 - lead * h;
}

TEST(RandomTest, GammaBetaAndDirichletDrawsFollowTheirDistributions) {
  // The oracle where P has a closed form: the exponential distribution's, and P(1/2, x) = erf(sqrt x).
  for (double x : {0.01, 0.7, 1.9, 2.5, 30.0}) {
    EXPECT_NEAR(gammaCdf(1, x), 1 - std::exp(-x), 1e-13) << x;
    EXPECT_NEAR(gammaCdf(0.5, x), std::erf(std::sqrt(x)), 1e-13) << x;
  }
  const Array key = random::key(77);
  const Shape shape = {200, 100};
  const double n = 20000, critical = 1.95 / std::sqrt(n);  // Kolmogorov-Smirnov's 0.1% value
  struct Case {
    double alpha;
    DType dtype;
  };
  for (const Case c : {Case{0.3, DType::f32}, Case{1, DType::f32}, Case{4.5, DType::f32}, Case{2, DType::f64},
                       Case{0.05, DType::f64}}) {
    SCOPED_TRACE(std::string(dtypeName(c.dtype)) + " alpha " + std::to_string(c.alpha));
    auto draw = [&](const std::string& devices) {
      return values(jit([&](const Tensor& k) { return random::gamma(k, c.alpha, shape, c.dtype); }, {.devices = devices})(key));
    };
    const std::vector<double> x = draw("cpu");
    ASSERT_EQ(x.size(), size_t(n));
    double total = 0;
    for (double v : x) {
      ASSERT_TRUE(v >= 0 && std::isfinite(v)) << v;
      total += v;
    }
    EXPECT_NEAR(total / n, c.alpha, 5 * std::sqrt(c.alpha / n));  // mean alpha, variance alpha
    EXPECT_LT(ksDistance(x, [&](double v) { return gammaCdf(c.alpha, v); }), critical);
    if (c.alpha == 1) {
      EXPECT_EQ(draw("sim"), x) << "sim";
    }
  }
  auto same = jit([](const Tensor& k) { return random::gamma(k, 2.5, {6}); });
  EXPECT_EQ(values(same(key)), values(same(key)));
  EXPECT_NE(values(same(random::key(78))), values(same(key)));

  // beta(a, 1)'s CDF is x^a and beta(1, b)'s 1 - (1 - x)^b; beta(2, 5) by its mean; mixup's
  // beta(0.2, 0.2) in f32 (gamma(0.2) numbers below f32's smallest, both sides at times) stays a number in [0, 1].
  auto betas = [&](double a, double b, DType dtype) {
    return values(jit([&](const Tensor& k) { return random::beta(k, a, b, shape, dtype); })(key));
  };
  EXPECT_LT(ksDistance(betas(0.5, 1, DType::f32), [](double v) { return std::sqrt(v); }), critical);
  EXPECT_LT(ksDistance(betas(1, 3, DType::f64), [](double v) { return 1 - std::pow(1 - v, 3); }), critical);
  for (auto [a, b] : {std::pair{2.0, 5.0}, std::pair{0.2, 0.2}}) {
    SCOPED_TRACE("beta(" + std::to_string(a) + ", " + std::to_string(b) + ")");
    double total = 0;
    for (double v : betas(a, b, DType::f32)) {
      ASSERT_TRUE(v >= 0 && v <= 1) << v;
      total += v;
    }
    const double variance = a * b / ((a + b) * (a + b) * (a + b + 1));
    EXPECT_NEAR(total / n, a / (a + b), 5 * std::sqrt(variance / n));
  }

  // dirichlet(1, 2, 3): rows of three that sum to 1, the first component beta(1, 5).
  const std::vector<double> rows =
      values(jit([](const Tensor& k) { return random::dirichlet(k, {1, 2, 3}, {200, 100}); })(key));
  ASSERT_EQ(rows.size(), size_t(3 * n));
  std::vector<double> first;
  double means[3] = {};
  for (size_t r = 0; r < size_t(n); ++r) {
    ASSERT_NEAR(rows[3 * r] + rows[3 * r + 1] + rows[3 * r + 2], 1.0, 1e-6) << "row " << r;
    first.push_back(rows[3 * r]);
    for (int j = 0; j < 3; ++j) means[j] += rows[3 * r + size_t(j)] / n;
  }
  for (int j = 0; j < 3; ++j) {
    const double want = (j + 1) / 6.0, variance = want * (1 - want) / 7;
    EXPECT_NEAR(means[j], want, 5 * std::sqrt(variance / n)) << "component " << j;
  }
  EXPECT_LT(ksDistance(first, [](double v) { return 1 - std::pow(1 - v, 5); }), critical);
  auto bf16 = jit([](const Tensor& k) { return cast(random::beta(k, 0.2, 0.2, {100}, DType::bf16), DType::f32); });
  for (double v : values(bf16(key))) ASSERT_TRUE(v >= 0 && v <= 1) << v;

  // Edges: empty shapes; a huge alpha (d v without cancellation to inf or 0), a tiny one in f64,
  // beta(0.01, 0.01) in f32 (each gamma 0 in f32 most of the time: the logarithms decide).
  EXPECT_EQ(jit([](const Tensor& k) { return random::gamma(k, 2, {0}); })(key).array().numel(), 0);
  EXPECT_EQ(jit([](const Tensor& k) { return random::dirichlet(k, {1, 2}, {3, 0}); })(key).array().shape, (Shape{3, 0, 2}));
  for (double v : values(jit([](const Tensor& k) { return random::gamma(k, 1e6, {100}); })(key)))
    ASSERT_NEAR(v, 1e6, 1e4) << "gamma(1e6): mean 1e6, deviation 1e3";
  for (double v : values(jit([](const Tensor& k) { return random::gamma(k, 1e-3, {100}, DType::f64); })(key)))
    ASSERT_TRUE(v >= 0 && std::isfinite(v)) << v;
  for (double v : values(jit([](const Tensor& k) { return random::beta(k, 0.01, 0.01, {1000}); })(key)))
    ASSERT_TRUE(v >= 0 && v <= 1) << v;

  // Bad alphas are refused at the caller's line, naming what is wrong.
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    const std::string error = errorOf([&] { jit([&](const Tensor& k) { return random::gamma(k, bad, {2}); })(key); });
    EXPECT_NE(error.find("RandomTest.cpp"), std::string::npos) << error;
    EXPECT_NE(error.find("spmd::random::gamma: every alpha must be a finite number > 0"), std::string::npos) << error;
  }
  EXPECT_NE(errorOf([&] { jit([](const Tensor& k) { return random::beta(k, 1, -2, {2}); })(key); })
                .find("spmd::random::beta: every alpha must be a finite number > 0, got -2"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { jit([](const Tensor& k) { return random::dirichlet(k, {}, {2}); })(key); })
                .find("alpha is empty"),
            std::string::npos);
}

TEST(RandomTest, PermutationsAreOrdersOfEveryIndex) {
  const Array key = random::key(9);
  auto draw = [](const std::string& devices, int64_t n) {
    return jit([n](const Tensor& k) { return random::permutation(k, n); }, {.devices = devices});
  };
  const std::vector<double> order = values(draw("cpu", 1000)(key));
  std::vector<double> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], double(i)) << "not a permutation";
  int64_t inPlace = 0;  // about 1 for a uniform permutation
  for (size_t i = 0; i < order.size(); ++i) inPlace += order[i] == double(i);
  EXPECT_LT(inPlace, 8);
  EXPECT_EQ(values(draw("sim", 1000)(key)), order) << "sim";
  EXPECT_NE(values(draw("cpu", 1000)(random::key(10))), order);
  // Which index comes first is uniform: over 2000 keys each of 4 about 500 times.
  std::vector<int> at(4, 0);
  auto small = draw("cpu", 4);
  for (uint32_t k = 0; k < 2000; ++k) ++at[size_t(values(small(random::foldIn(key, k)))[0])];
  for (int count : at) EXPECT_NEAR(count, 500, 90);  // 4.6 sigma
  EXPECT_NE(errorOf([] { jit([](const Tensor& k) { return random::permutation(k, -1); })(random::key(1)); })
                .find("negative extent"),
            std::string::npos);
}

TEST(RandomTest, BernoulliMasksAndCategoricalDrawsComeAtTheirProbabilities) {
  const Array key = random::key(5);
  auto mask = [&](double p) {
    return values(jit([p](const Tensor& k) { return random::bernoulli(k, p, {400, 250}); })(key));
  };
  std::vector<double> third = mask(0.3);
  EXPECT_NEAR(double(std::count(third.begin(), third.end(), 1.0)) / 1e5, 0.3, 0.0073);  // 5 sigma
  EXPECT_EQ(std::count(third.begin(), third.end(), 0.0) + std::count(third.begin(), third.end(), 1.0), 100000);
  EXPECT_EQ(mask(0.0), std::vector<double>(100000, 0.0));
  EXPECT_EQ(mask(1.0), std::vector<double>(100000, 1.0));
  // Categories drawn along the last axis and along the first: each at its softmax probability,
  // a -inf logit never.
  const std::vector<double> probabilities = {0.1, 0.2, 0.3, 0.4, 0.0};
  const int64_t rows = 20000, k = int64_t(probabilities.size());
  std::vector<float> logits;
  for (int64_t r = 0; r < rows; ++r)
    for (double p : probabilities) logits.push_back(float(std::log(p) + 3.0));  // shifted: softmax ignores it
  Array byRow = Array::of<float>({rows, k}, logits);
  auto last = jit([](const Tensor& key_, const Tensor& l) { return random::categorical(key_, l); });
  auto first = jit([](const Tensor& key_, const Tensor& l) {
    return random::categorical(key_, transpose(l, {1, 0}), 0);
  });
  auto expectProbabilities = [&](const Tensor& drawn, const std::string& what) {
    ASSERT_EQ(drawn.array().dtype, DType::i32);
    ASSERT_EQ(drawn.array().shape, (Shape{rows}));
    std::vector<int64_t> counts(size_t(k), 0);
    for (int32_t c : drawn.array().values<int32_t>()) {
      ASSERT_TRUE(c >= 0 && c < k) << c;
      ++counts[size_t(c)];
    }
    for (int64_t c = 0; c < k; ++c) {
      const double p = probabilities[size_t(c)], sigma = std::sqrt(p * (1 - p) / double(rows));
      EXPECT_NEAR(double(counts[size_t(c)]) / double(rows), p, 5 * sigma + 1e-12) << what << ", category " << c;
    }
  };
  expectProbabilities(last(key, byRow), "last axis");
  expectProbabilities(first(key, byRow), "first axis");
  EXPECT_NE(errorOf([] { jit([](const Tensor& k) { return random::bernoulli(k, 1.5, {2}); })(random::key(1)); })
                .find("spmd::random::bernoulli: p must be in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_NE(errorOf([] { jit([](const Tensor& k) { return random::bernoulli(k, NAN, {2}); })(random::key(1)); })
                .find("p must be in [0, 1]"),
            std::string::npos);
  std::string axis = errorOf([&] { jit([](const Tensor& k, const Tensor& l) { return random::categorical(k, l, 2); })(key, byRow); });
  EXPECT_NE(axis.find("RandomTest.cpp"), std::string::npos) << axis;
  EXPECT_NE(axis.find("axis 2 is out of range for logits [20000, 5]"), std::string::npos) << axis;
  std::string dtype = errorOf([] { jit([](const Tensor& k) { return random::normal(k, {2}, DType::i32); })(random::key(1)); });
  EXPECT_NE(dtype.find("spmd::random::normal: dtype must be f32, f64 or bf16, got i32"), std::string::npos) << dtype;
}

TEST(RandomTest, TracedAndHostKeysAgree) {
  Array key = random::key(99);
  auto derive = jit([](const Tensor& k, const Tensor& data) { return random::foldIn(k, data); });
  for (int32_t data : {0, 1, 7, -3}) {
    Tensor traced = derive(key, Array::of<int32_t>({}, std::vector<int32_t>{data}));
    EXPECT_EQ(values(traced), values(Tensor(random::foldIn(key, uint32_t(data))))) << data;
  }
  std::vector<Array> keys = random::split(key, 3);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_NE(values(Tensor(keys[0])), values(Tensor(keys[1])));
  EXPECT_NE(values(Tensor(keys[0])), values(Tensor(random::foldIn(key, 0)))) << "split and foldIn are separate";
  EXPECT_NE(errorOf([] { random::split(Array::of<float>({2}, std::vector<float>{1, 2}), 2); }).find("i32[2]"),
            std::string::npos);
}

// The dropout mask replica r draws at step t, computed on the host from the definitions written
// out here (only the Philox block function itself is the library's, and it is checked against
// Random123's known answers above): the replica's key is block (r, 0, 0, "fold") of the step
// key, element i is word i % 4 of block (i / 4, 0, 0, 0), its top 24 bits over 2^24 the uniform
// draw, kept (scaled by 1 / (1 - rate) in f32) where it is at least the rate.
std::vector<double> expectedDropout(const Array& stepKey, int32_t replica, int64_t n, double rate) {
  const uint32_t s0 = uint32_t(stepKey.values<int32_t>()[0]), s1 = uint32_t(stepKey.values<int32_t>()[1]);
  const philox::Words k = philox::philox4x32(philox::Words{{uint32_t(replica), 0, 0, 0x666f6c64u}}, s0, s1);
  std::vector<double> out;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = philox::philox4x32(philox::Words{{uint32_t(i / 4), 0, 0, 0}}, k.w[0], k.w[1]).w[i % 4];
    const double u = double(bits >> 8) / 16777216.0;
    out.push_back(u >= rate ? double(float(1.0 / (1.0 - rate))) : 0.0);
  }
  return out;
}

TEST(RandomTest, DropoutUnderPmapDependsOnlyOnKeyReplicaAndStep) {
  const int64_t n = 1000;
  const double rate = 0.25;
  auto mapped = [&](const std::string& devices) {
    return pmap([&](const Tensor& x, const Tensor& key) {
                  return random::dropout(x, random::foldIn(key, axisIndex("batch")), rate);
                },
                {.inAxes = {0, replicated}, .outAxes = {0}, .devices = devices});
  };
  Array key = random::key(7);
  auto four = mapped("cpu:4"), two = mapped("cpu:2"), one = mapped("cpu:1");
  auto ones = [&](int64_t replicas) {
    Array a = Array::zeros(DType::f32, {replicas, n});
    for (float& v : a.values<float>()) v = 1.0f;
    return a;
  };
  for (int64_t step = 0; step < 2; ++step) {
    Array stepKey = random::foldIn(key, uint32_t(step));
    std::vector<double> y4 = values(four(ones(4), stepKey)), y2 = values(two(ones(2), stepKey)),
                        y1 = values(one(ones(1), stepKey));
    EXPECT_EQ(y4, values(four(ones(4), stepKey))) << "a repeated run gives the same bits";
    for (int32_t r = 0; r < 4; ++r) {
      std::vector<double> row(y4.begin() + r * n, y4.begin() + (r + 1) * n);
      EXPECT_EQ(row, expectedDropout(stepKey, r, n, rate)) << "replica " << r << " step " << step;
      if (r < 2) {
        EXPECT_EQ(row, std::vector<double>(y2.begin() + r * n, y2.begin() + (r + 1) * n)) << "cpu:2";
      }
      if (r < 1) { EXPECT_EQ(row, y1) << "cpu:1"; }
      int64_t kept = std::count_if(row.begin(), row.end(), [](double v) { return v != 0; });
      EXPECT_NEAR(double(kept) / double(n), 1 - rate, 0.06) << "replica " << r;
    }
    for (int32_t r = 1; r < 4; ++r)
      EXPECT_NE(std::vector<double>(y4.begin(), y4.begin() + n),
                std::vector<double>(y4.begin() + r * n, y4.begin() + (r + 1) * n))
          << "replicas 0 and " << r << " drew the same mask";
  }
  EXPECT_NE(values(four(ones(4), random::foldIn(key, 0))), values(four(ones(4), random::foldIn(key, 1))))
      << "each step has its own masks";
  EXPECT_EQ(four.compileCount(), 1) << "keys are inputs: new steps do not recompile";
}

TEST(RandomTest, DropoutLayerNeedsAKeyInTrainingOnly) {
  nn::Sequential net("");
  net.addNamed<nn::Linear>("fc", 4, 3);
  net.addNamed<nn::Dropout>("drop", 0.5);
  auto [params, state] = net.initialize(1);
  Array x = spmd::testing::randomArray(DType::f32, {2, 4}, 5);
  auto infer = jit([&](const Tree& p, const Tensor& xs) { return net.apply(p, state, xs, false).first; });
  auto plain = jit([&](const Tree& p, const Tensor& xs) {
    return matmul(xs, p.at("fc.weight"), p.at("fc.bias"), {.transposeRhs = true});
  });
  EXPECT_EQ(values(infer(params, x)), values(plain(params, x))) << "inference is the identity";
  auto noKey = jit([&](const Tree& p, const Tensor& xs) { return net.apply(p, state, xs, true).first; });
  std::string error = errorOf([&] { noKey(params, x); });
  EXPECT_NE(error.find("nn::Dropout 'drop' in training mode needs a random key"), std::string::npos) << error;
  auto train = jit([&](const Tree& p, const Tensor& xs, const Tensor& key) { return net.apply(p, state, xs, true, key).first; });
  std::vector<double> y = values(train(params, x, random::key(3))), base = values(plain(params, x));
  int zeros = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0) ++zeros;
    else EXPECT_NEAR(y[i], 2 * base[i], 1e-6);
  }
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 6);
  EXPECT_NE(errorOf([] { nn::Dropout("d", 1.0); }).find("rate must be in [0, 1)"), std::string::npos);
}

}  // namespace
}  // namespace spmd
