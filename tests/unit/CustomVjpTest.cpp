// spmd::customVjp (frontend/CustomVjp.h, spmd.custom_vjp, passes/Autodiff.cpp): the user's
// backward replaces the derivative of the forward function wherever a gradient is taken (jit,
// pmap with its pmean insertion, spmd::checkpoint, gradient accumulation), the forward alone runs
// where none is, and misuse is an error naming the user's line.
#include <gtest/gtest.h>

#include <cmath>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;
using spmd::testing::randomArray;
using spmd::testing::valueAt;

// log(1 + exp(x)) written stably (max(x, 0) + log(1 + exp(-|x|))), with the gradient
// g * sigmoid(x) from the input kept as the residual: finite where exp overflows.
auto softplus() {
  return customVjp(
      [](const Tensor& x) {
        Tensor zero = x * 0.0;
        return std::pair{maximum(x, zero) + log(exp(-abs(x)) + 1.0), x};
      },
      [](const Tensor& x, const Tensor& g) { return g * sigmoid(x); });
}

// The forward squares; the backward says 3x (not the true 2x), so the gradient shows which ran.
TEST(CustomVjpTest, TheGradientIsTheUsersBackwardAndTheValueTheForward) {
  auto square = customVjp([](const Tensor& x) { return std::pair{x * x, x}; },
                          [](const Tensor& x, const Tensor& g) { return g * x * 3.0; });
  auto step = jit([&](const Tensor& w) {
    auto [loss, g] = value_and_grad([&](const Tensor& p) { return sum(square(p), {0}); })(w);
    return std::tuple{loss, g, square(w)};
  });
  Array w = randomArray(DType::f32, {5}, 1);
  auto [loss, g, y] = step(w);
  float total = 0;
  for (int64_t i = 0; i < 5; ++i) {
    const float x = w.values<float>()[i];
    EXPECT_EQ(g.array().values<float>()[i], 1.0f * x * 3.0f) << i;
    EXPECT_EQ(y.array().values<float>()[i], x * x) << i;
    total += x * x;
  }
  EXPECT_NEAR(loss.array().values<float>()[0], total, 1e-5);
}

// f64: the custom gradient against central finite differences of the forward; f32 at +-100: the
// custom gradient is sigmoid's (1 and 0) where differentiating the naive log(1 + exp(x)) gives
// NaN (inf / inf).
TEST(CustomVjpTest, MatchesFiniteDifferencesAndStaysFiniteWhereTheNaiveGradientIsNot) {
  auto f = softplus();
  auto gradOf = jit([&](const Tensor& x) { return grad([&](const Tensor& v) { return sum(f(v), {0}); })(x); });
  auto valueOf = jit([&](const Tensor& x) { return f(x); });
  const std::vector<double> points = {-3.0, -0.5, 0.2, 2.5};
  Array x = Array::of<double>({4}, points);
  Array g = gradOf(x).array();
  const double h = 1e-6;
  for (size_t i = 0; i < points.size(); ++i) {
    Array up = Array::of<double>({1}, std::vector<double>{points[i] + h});
    Array down = Array::of<double>({1}, std::vector<double>{points[i] - h});
    const double fd = (valueOf(up).array().values<double>()[0] - valueOf(down).array().values<double>()[0]) / (2 * h);
    EXPECT_NEAR(g.values<double>()[i], fd, 1e-8) << points[i];
  }
  Array far = Array::of<float>({2}, std::vector<float>{100.0f, -100.0f});
  Array custom = gradOf(far).array();
  EXPECT_EQ(custom.values<float>()[0], 1.0f);
  EXPECT_NEAR(custom.values<float>()[1], 0.0f, 1e-30);
  auto naive = jit([](const Tensor& v) { return grad([](const Tensor& p) { return sum(log(exp(p) + 1.0), {0}); })(v); });
  EXPECT_TRUE(std::isnan(naive(far).array().values<float>()[0]));
}

// Several arguments (a Tensor and a Tree) and a tuple of outputs: the backward returns a tuple of
// the arguments' cotangents, each of its argument's structure.
TEST(CustomVjpTest, SeveralArgumentsAndOutputs) {
  auto f = customVjp(
      [](const Tensor& a, const Tree& t) { return std::pair{std::tuple{a * t.at("u"), a + t.at("v")}, std::tuple{a, t.at("u")}}; },
      [](const std::tuple<Tensor, Tensor>& r, const std::tuple<Tensor, Tensor>& g) {
        auto [a, u] = r;
        auto [gp, gs] = g;
        Tree dt;
        dt.set("u", gp * a), dt.set("v", gs);
        return std::tuple{gp * u + gs, dt};
      });
  auto step = jit([&](const Tensor& a, const Tree& t) {
    Tree all = t;
    all.set("a", a);
    return grad([&](const Tree& p) {
      Tree inner;
      inner.set("u", p.at("u")), inner.set("v", p.at("v"));
      auto [prod, s] = f(p.at("a"), inner);
      return sum(prod * 2.0 + s, {0});
    })(all);
  });
  Array a = randomArray(DType::f64, {3}, 2);
  Tree t;
  t.set("u", randomArray(DType::f64, {3}, 3)), t.set("v", randomArray(DType::f64, {3}, 4));
  Tree g = step(Tensor(a), t);
  for (int64_t i = 0; i < 3; ++i) {  // d/da = 2u + 1, d/du = 2a, d/dv = 1
    EXPECT_NEAR(valueAt(g.at("a").array(), i), 2 * valueAt(t.at("u").array(), i) + 1, 1e-12);
    EXPECT_NEAR(valueAt(g.at("u").array(), i), 2 * valueAt(a, i), 1e-12);
    EXPECT_NEAR(valueAt(g.at("v").array(), i), 1.0, 1e-12);
  }
}

// The loss mean(softplus(x w)) under pmap on cpu:2 (the gradient averaged by the inserted
// pmean), with gradient accumulation (2 micro-batches a device), and with the customVjp inside
// spmd::checkpoint: each matches jit on the whole batch (f64, 1e-12); the checkpointed step gives
// the plain step's bits.
TEST(CustomVjpTest, UnderPmapWithAccumulationAndRemat) {
  auto f = softplus();
  auto lossOf = [&](const Tensor& w, const Tensor& x, bool remat) {
    auto body = [&](const Tensor& h) { return f(h); };
    Tensor h = matmul(x, w);
    Tensor y = remat ? checkpoint(body)(h) : body(h);
    return mean(y, {0, 1});
  };
  auto whole = jit([&](const Tensor& w, const Tensor& x) {
    return value_and_grad([&](const Tensor& p) { return lossOf(p, x, false); })(w);
  });
  auto mapped = [&](bool remat, int accumulate) {
    return pmap(
        [&, remat](const Tensor& w, const Tensor& x) {
          return value_and_grad([&](const Tensor& p) { return lossOf(p, x, remat); })(w);
        },
        {.inAxes = {replicated, split}, .devices = "cpu:2", .accumulate = accumulate});
  };
  Array w = randomArray(DType::f64, {3, 4}, 5), x = randomArray(DType::f64, {8, 3}, 6, -3, 3);
  auto [loss, g] = whole(w, x);
  auto plain = mapped(false, 1), remat = mapped(true, 1), accumulated = mapped(false, 2);
  auto [pl, pg] = plain(w, x);
  auto [rl, rg] = remat(w, x);
  auto [al, ag] = accumulated(w, x);
  EXPECT_NEAR(valueAt(pl.array(), 0), valueAt(loss.array(), 0), 1e-12);
  EXPECT_NEAR(valueAt(al.array(), 0), valueAt(loss.array(), 0), 1e-12);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_NEAR(valueAt(pg.array(), i), valueAt(g.array(), i), 1e-12) << i;
    EXPECT_NEAR(valueAt(ag.array(), i), valueAt(g.array(), i), 1e-12) << i;
    EXPECT_EQ(valueAt(rg.array(), i), valueAt(pg.array(), i)) << i;
  }
  EXPECT_EQ(valueAt(rl.array(), 0), valueAt(pl.array(), 0));
}

TEST(CustomVjpTest, MisuseIsAnErrorAtTheUsersLine) {
  auto id = [](const Tensor& x) { return std::pair{x, x}; };
  Array w = randomArray(DType::f32, {3}, 7);
  auto wrongCount = customVjp(id, [](const Tensor&, const Tensor& g) { return std::tuple{g, g}; });
  const std::string count = errorOf([&] { jit([&](const Tensor& v) { return wrongCount(v); })(w); });
  EXPECT_NE(count.find("CustomVjpTest.cpp:"), std::string::npos) << count;
  EXPECT_NE(count.find("the backward function returned 2 cotangent tensor(s) for 1 argument tensor(s)"), std::string::npos)
      << count;
  auto wrongShape = customVjp(id, [](const Tensor&, const Tensor& g) { return sum(g, {0}); });
  const std::string shape = errorOf([&] { jit([&](const Tensor& v) { return wrongShape(v); })(w); });
  EXPECT_NE(shape.find("the backward function's cotangent for 'argument 0' is f32[] but the argument is f32[3]"),
            std::string::npos)
      << shape;
  auto integers = customVjp(id, [](const Tensor&, const Tensor& g) { return g; });
  const std::string integer = errorOf([&] {
    jit([&](const Tensor& v) { return integers(v); })(Array::of<int32_t>({2}, std::vector<int32_t>{1, 2}));
  });
  EXPECT_NE(integer.find("is i32[2] (integer): only float tensors have cotangents"), std::string::npos) << integer;
  // The forward reads exp(p) from outside its arguments while p is differentiated.
  const std::string captured = errorOf([&] {
    jit([&](const Tensor& v) {
      return grad([&](const Tensor& p) {
        Tensor e = exp(p);
        auto scaled = customVjp([&](const Tensor& x) { return std::pair{x * e, x}; },
                                [](const Tensor&, const Tensor& g) { return g; });
        return sum(scaled(v * 0.0 + 1.0), {0});
      })(v);
    })(w);
  });
  EXPECT_NE(captured.find("reads a value from outside its arguments that depends on what is differentiated"),
            std::string::npos)
      << captured;
  EXPECT_NE(captured.find("CustomVjpTest.cpp:"), std::string::npos) << captured;
}

}  // namespace
}  // namespace spmd
