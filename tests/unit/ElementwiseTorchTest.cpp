// The elementwise formula table (runtime/base/ElementwiseTable.h) against outside values: every
// backend and the reference expand the same table, so they can only be checked against each
// other. Here the DSL's exp, log, sqrt, tanh, sigmoid, gelu, relu, neg, abs, sin, cos, log1p, expm1, erf, erfinv, floor, ceil, round, sign and
// the composed activations (silu, softplus, logSigmoid, elu, leakyRelu, mish) are within a few ulps
// of the exact value (long double, from formulas without cancellation), their gradients (the
// VJP rules) too or, where a gradient computed from a saturated result loses its digits, no
// further from it than PyTorch's, and div, maximum and minimum equal PyTorch's
// (tests/reference/torch_elementwise.py), at edge values: zeros of both signs, subnormals, the
// smallest normal, values around exp's overflow and underflow, the largest finite values,
// infinities and NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "TestUtil.h"
#include "TorchExchange.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

template <typename T>
Array edgeValues() {
  using L = std::numeric_limits<T>;
  constexpr bool f32 = sizeof(T) == 4;
  // Around exp's overflow (log of the largest value) and where its result becomes subnormal
  // (log of the smallest normal) and zero.
  const double overflow = std::log(double(L::max())), subnormal = std::log(double(L::min()));
  // Last, 0.9 and 1 - 1e-6: erfinv's steep ends, and 2.5: a tie for round (the binary ops' pairs
  // pick the others by index).
  std::vector<double> magnitudes = {0.0, double(L::denorm_min()), double(L::min()), 1e-8, 0.25, 0.5, 1.0, 3.0,
                                    10.0, 20.0, overflow * 0.999999, overflow * 1.000001, -subnormal,
                                    -subnormal * 1.05, f32 ? 1e30 : 1e300, double(L::max()), L::infinity(), 0.9, 1 - 1e-6, 2.5};
  std::vector<T> values;
  for (double m : magnitudes) values.push_back(T(m)), values.push_back(T(-m));
  values.push_back(L::quiet_NaN());
  return Array::of<T>({int64_t(values.size())}, values);
}

// sigmoid and softplus in long double without overflow or cancellation.
long double sigmoidL(long double x) {
  if (std::isnan(x)) return x;
  return x >= 0 ? 1 / (1 + expl(-x)) : expl(x) / (1 + expl(x));
}
long double softplusL(long double x) { return x > 0 ? x + log1pl(expl(-x)) : log1pl(expl(x)); }

// erfinv in long double: Newton on erfl (erfcl on the tail, whose distance from 1 is exact) from
// sqrt(pi)/2 y near 0 and a bisection's start on the tail, so nothing of spmd's formula enters it.
long double erfinvL(long double y) {
  if (std::isnan(y) || fabsl(y) > 1) return NAN;
  if (fabsl(y) == 1) return y * INFINITY;
  if (y == 0) return y;
  const long double a = fabsl(y), q = 1 - a;
  auto f = [&](long double x) { return a < 0.5L ? erfl(x) - a : q - erfcl(x); };
  long double x = 0.8862269254527580136490837416705725L * a;
  if (a >= 0.5L) {
    long double lo = 0, hi = 30;
    for (int i = 0; i < 80; ++i) (f((lo + hi) / 2) < 0 ? lo : hi) = (lo + hi) / 2;
    x = (lo + hi) / 2;
  }
  for (int i = 0; i < 8; ++i) x -= f(x) / (1.1283791670955125738961589031215452L * expl(-x * x));
  return y < 0 ? -x : x;
}

// The exact value of each op and of its derivative, in long double (64-bit significand on x86-64:
// 11 bits beyond f64), from formulas without cancellation (erfc for the normal CDF).
struct Exact {
  long double (*value)(long double);
  long double (*derivative)(long double);
};
const std::map<std::string, Exact>& exactOps() {
  static const long double kRootHalf = 0.707106781186547524400844362104849039L;
  static const long double kRootTwoPi = 2.506628274631000502415765284811045253L;
  static const std::map<std::string, Exact> ops = {
      {"exp", {[](long double x) { return expl(x); }, [](long double x) { return expl(x); }}},
      {"log", {[](long double x) { return logl(x); }, [](long double x) { return 1 / x; }}},
      {"sqrt", {[](long double x) { return sqrtl(x); }, [](long double x) { return 0.5L / sqrtl(x); }}},
      {"tanh", {[](long double x) { return tanhl(x); }, [](long double x) { return 1 / (coshl(x) * coshl(x)); }}},
      {"sigmoid", {[](long double x) { return 1 / (1 + expl(-x)); },
                   [](long double x) {
                     long double e = expl(-fabsl(x));
                     return std::isnan(x) ? x : e / ((1 + e) * (1 + e));
                   }}},
      {"gelu", {[](long double x) { return 0.5L * x * erfcl(-x * kRootHalf); },
                [](long double x) { return 0.5L * erfcl(-x * kRootHalf) + x * expl(-0.5L * x * x) / kRootTwoPi; }}},
      {"relu", {[](long double x) { return x > 0 || std::isnan(x) ? x : 0.0L; },
                [](long double x) { return x > 0 ? 1.0L : 0.0L; }}},
      {"sin", {[](long double x) { return sinl(x); }, [](long double x) { return cosl(x); }}},
      {"cos", {[](long double x) { return cosl(x); }, [](long double x) { return -sinl(x); }}},
      {"neg", {[](long double x) { return -x; }, [](long double) { return -1.0L; }}},
      {"abs", {[](long double x) { return fabsl(x); },
               [](long double x) { return x > 0 ? 1.0L : (x < 0 ? -1.0L : 0.0L); }}},
      {"log1p", {[](long double x) { return log1pl(x); }, [](long double x) { return 1 / (1 + x); }}},
      {"expm1", {[](long double x) { return expm1l(x); }, [](long double x) { return expl(x); }}},
      {"erf", {[](long double x) { return erfl(x); },
               [](long double x) { return 1.1283791670955125738961589031215452L * expl(-x * x); }}},
      {"erfinv", {[](long double x) { return erfinvL(x); },
                  [](long double x) {
                    const long double y = erfinvL(x);
                    return 0.8862269254527580136490837416705725L * expl(y * y);
                  }}},
      // Steps: zero gradients.
      {"floor", {[](long double x) { return floorl(x); }, [](long double) { return 0.0L; }}},
      {"ceil", {[](long double x) { return ceill(x); }, [](long double) { return 0.0L; }}},
      {"round", {[](long double x) { return nearbyintl(x); }, [](long double) { return 0.0L; }}},
      {"sign", {[](long double x) { return x > 0 ? 1.0L : (x < 0 ? -1.0L : x); }, [](long double) { return 0.0L; }}},
      // The composed activations (frontend/Composed.h).
      {"silu", {[](long double x) { return x * sigmoidL(x); },
                [](long double x) { return sigmoidL(x) * (1 + x * sigmoidL(-x)); }}},
      {"softplus", {[](long double x) { return softplusL(x); }, [](long double x) { return sigmoidL(x); }}},
      {"logsigmoid", {[](long double x) { return -softplusL(-x); }, [](long double x) { return sigmoidL(-x); }}},
      {"elu", {[](long double x) { return x > 0 || std::isnan(x) ? x : expm1l(x); },
               [](long double x) { return x > 0 ? 1.0L : expl(x); }}},
      {"leaky_relu", {[](long double x) { return x > 0 || std::isnan(x) ? x : 0.01L * x; },
                      [](long double x) { return x > 0 ? 1.0L : 0.01L; }}},
      {"mish", {[](long double x) { return x * tanhl(softplusL(x)); },
                [](long double x) {
                  long double t = tanhl(softplusL(x));
                  return t + x * sigmoidL(x) * (1 - t * t);
                }}},
  };
  return ops;
}

// How far `v` is from the exact value of `f` at `x` or at any input within 2 ulps of `x` (the
// error that rounding x / sqrt 2 inside gelu, say, may cause), rounded to the dtype, in units in
// the last place: 0 inside that range, or when both are NaN or the same infinity; infinite when
// only one is.
template <typename T>
double ulpsFrom(double v, long double (*f)(long double), double x) {
  const long double step = 2 * std::numeric_limits<T>::epsilon();
  T a = T(f(x)), b = T(f(x * (1 - step))), c = T(f(x * (1 + step)));
  if ((std::isnan(v) && std::isnan(a)) || v == double(a)) return 0;
  if (!std::isfinite(v) || !std::isfinite(a)) return INFINITY;
  T low = std::min({a, b, c}), high = std::max({a, b, c});
  if (v >= low && v <= high) return 0;
  T nearest = v < low ? low : high;
  double ulp = std::numeric_limits<T>::epsilon() * std::fabs(double(nearest)) + std::numeric_limits<T>::denorm_min();
  return std::fabs(v - double(nearest)) / ulp;
}

// Ours is within `ulps` of the exact value; with `orAsFarAsTorch`, also where it is no further
// from it than twice PyTorch's distance or equals PyTorch's value.
template <typename T>
void expectAccurate(const Array& ours, const Array& torch, const Array& x, long double (*exact)(long double),
                    double ulps, bool orAsFarAsTorch, const std::string& what) {
  int bad = 0;
  double worstMine = 0, worstTheirs = 0, worstX = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double a = testing::valueAt(ours, i), t = testing::valueAt(torch, i), xi = testing::valueAt(x, i);
    double mine = ulpsFrom<T>(a, exact, xi), theirs = ulpsFrom<T>(t, exact, xi);
    if (std::isfinite(mine) && mine > worstMine) worstMine = mine, worstX = xi;
    if (std::isfinite(theirs)) worstTheirs = std::max(worstTheirs, theirs);
    bool asFar = (std::isnan(a) && std::isnan(t)) || a == t || mine <= 2 * theirs;
    if (mine > ulps && !(orAsFarAsTorch && asFar) && bad++ < 8)
      ADD_FAILURE() << what << " at x = " << xi << ": ours " << a << " (" << mine << " ulp from exact "
                    << double(exact(xi)) << "), torch " << t << " (" << theirs << " ulp)";
  }
  std::printf("  %-16s worst ulps from the exact value: spmd %9.3g (at %g), torch %9.3g\n", what.c_str(),
              worstMine, worstX, worstTheirs);
}

// Ours equal to torch's within `ulps` units in the last place (or both NaN), or, for an op with
// an `exact` value (pow: torch's f64 pow overflows max^1 to inf), within `ulps` of that.
void expectSame(const Array& ours, const Array& torch, const Array& x, double ulps, const std::string& what,
                const Array* y = nullptr, long double (*exact)(long double, long double) = nullptr) {
  const bool f32 = torch.dtype == DType::f32;
  const double epsilon = f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  const double tiny = f32 ? std::numeric_limits<float>::denorm_min() : std::numeric_limits<double>::denorm_min();
  int bad = 0;
  for (int64_t i = 0; i < torch.numel(); ++i) {
    double a = testing::valueAt(ours, i), b = testing::valueAt(torch, i);
    auto close = [&](double u, double v) {
      return (std::isnan(u) && std::isnan(v)) || u == v ||
             (std::isfinite(u) && std::isfinite(v) && std::fabs(u - v) <= ulps * (epsilon * std::fabs(v) + tiny));
    };
    double e = b;
    if (exact) {
      const long double value = exact(testing::valueAt(x, i), testing::valueAt(*y, i));
      e = f32 ? double(float(value)) : double(value);
    }
    bool same = close(a, b) || (exact && close(a, e));
    if (!same && bad++ < 8)
      ADD_FAILURE() << what << " at x = " << testing::valueAt(x, i) << ": ours " << a << ", torch " << b;
  }
}

template <typename T>
void checkDType(testing::Exchange& exchange, const Array& x, const Array& a, const Array& b) {
  const std::string dtype(dtypeName(x.dtype));
  using Unary = Tensor (*)(const Tensor&, Loc);
  const std::vector<std::pair<std::string, Unary>> unary = {
      {"exp", spmd::exp}, {"log", spmd::log}, {"sqrt", spmd::sqrt}, {"tanh", spmd::tanh},
      {"sigmoid", spmd::sigmoid}, {"gelu", spmd::gelu}, {"relu", spmd::relu}, {"neg", spmd::neg},
      {"abs", spmd::abs}, {"sin", spmd::sin}, {"cos", spmd::cos}, {"log1p", spmd::log1p}, {"expm1", spmd::expm1},
      {"erf", spmd::erf}, {"erfinv", spmd::erfinv},
      {"floor", spmd::floor}, {"ceil", spmd::ceil}, {"round", spmd::round}, {"sign", spmd::sign}, {"silu", spmd::silu}, {"softplus", spmd::softplus}, {"logsigmoid", spmd::logSigmoid},
      {"elu", [](const Tensor& v, Loc l) { return spmd::elu(v, 1.0, l); }},
      {"leaky_relu", [](const Tensor& v, Loc l) { return spmd::leakyRelu(v, 0.01, l); }}, {"mish", spmd::mish}};
  // Composed of several roundings: as close as PyTorch's where that is further than 4 ulps.
  const std::set<std::string> composed = {"silu", "softplus", "logsigmoid", "elu", "leaky_relu", "mish"};
  for (const auto& [name, fn] : unary) {
    auto f = jit([fn](const Tensor& v) {
      return value_and_grad([&](const Tensor& w) { return sum(fn(w, Loc::current()), {0}); })(v);
    });
    auto forward = jit([fn](const Tensor& v) { return fn(v, Loc::current()); });
    auto [total, dx] = f(x);
    Tensor y = forward(x);
    // libm's and PyTorch's (SLEEF's) functions are each within 1 ulp or so of the exact value,
    // and so must our formulas be, everywhere. A gradient computed from the op's result (1 - y^2
    // for tanh, y (1 - y) for sigmoid, as PyTorch and JAX do) loses the digits that y lost where
    // it saturates: there it must come as close as PyTorch's.
    const Exact& exact = exactOps().at(name);
    expectAccurate<T>(y.array(), exchange.read(name + "." + dtype + ".y", x.shape, x.dtype), x, exact.value, 4,
                      composed.count(name) > 0, name + " " + dtype);
    expectAccurate<T>(dx.array(), exchange.read(name + "." + dtype + ".dx", x.shape, x.dtype), x, exact.derivative,
                      8, true, "d" + name + "/dx " + dtype);
  }
  using Binary = Tensor (*)(const Tensor&, const Tensor&, Loc);
  const std::vector<std::pair<std::string, Binary>> binary = {
      {"div", spmd::div}, {"maximum", spmd::maximum}, {"minimum", spmd::minimum},
      {"pow", [](const Tensor& p, const Tensor& q, Loc l) { return spmd::pow(p, q, l); }}};
  for (const auto& [name, fn] : binary) {
    auto f = jit([fn](const Tensor& p, const Tensor& q) { return fn(p, q, Loc::current()); });
    expectSame(f(a, b).array(), exchange.read(name + "." + dtype + ".y", a.shape, a.dtype), a, 1, name + " " + dtype, &b,
               name == "pow" ? +[](long double p, long double q) { return powl(p, q); } : nullptr);
  }
}

TEST(ElementwiseTorchTest, FormulasAndGradientsMatchPyTorchAtEdgeValues) {
  if (std::string why = testing::torchMissing(); !why.empty()) GTEST_FAIL() << why;
  testing::Exchange exchange;
  Array x32 = edgeValues<float>(), x64 = edgeValues<double>();
  // Every pair of a few edge values, for the binary ops.
  auto pairs = [](const Array& x, bool second) {
    std::vector<int64_t> picks = {0, 1, 2, 6, 12, 13, 30, 31, 32, 33, x.numel() - 1};
    Array out = Array::zeros(x.dtype, {int64_t(picks.size() * picks.size())});
    for (size_t i = 0; i < picks.size(); ++i)
      for (size_t j = 0; j < picks.size(); ++j) {
        double v = testing::valueAt(x, second ? picks[j] : picks[i]);
        if (x.dtype == DType::f32) out.values<float>()[i * picks.size() + j] = float(v);
        else out.values<double>()[i * picks.size() + j] = v;
      }
    return out;
  };
  Array a32 = pairs(x32, false), b32 = pairs(x32, true), a64 = pairs(x64, false), b64 = pairs(x64, true);
  exchange.write("x.f32", x32), exchange.write("x.f64", x64);
  exchange.write("a.f32", a32), exchange.write("b.f32", b32), exchange.write("a.f64", a64), exchange.write("b.f64", b64);
  exchange.close();
  std::string command = testing::python() + " " SPMD_SOURCE_DIR "/tests/reference/torch_elementwise.py " + exchange.dir();
  ASSERT_EQ(std::system(command.c_str()), 0) << "failed: " << command;
  checkDType<float>(exchange, x32, a32, b32);
  checkDType<double>(exchange, x64, a64, b64);
}

// pow's gradients where torch's rule masks them (a = 0: b a^(b - 1) with b = 0, a^b log a with
// b >= 0) and where it does not, against torch.pow's autograd (torch 1.13, f64), on cpu and sim.
TEST(ElementwiseTorchTest, PowGradientsAtZeroAreTorchs) {
  const Array a = Array::of<double>({5}, std::vector<double>{0, 0, -2, 2, 0});
  const Array b = Array::of<double>({5}, std::vector<double>{0, 2, 0.5, -1, -1});
  const double inf = INFINITY, nan = NAN;
  const std::vector<double> y = {1, 0, nan, 0.5, inf}, da = {0, 0, nan, -0.25, -inf},
                            db = {0, 0, nan, 0.34657359027997264, -inf};
  for (const char* devices : {"cpu:1", "sim:1"}) {
    SCOPED_TRACE(devices);
    auto f = jit([](const Tensor& p, const Tensor& q) {
      return std::tuple{pow(p, q), grad([&](const Tensor& u) { return sum(pow(u, q), {0}); })(p),
                        grad([&](const Tensor& v) { return sum(pow(p, v), {0}); })(q)};
    }, {.devices = devices});
    auto [value, dp, dq] = f(a, b);
    auto expect = [](const Array& got, const std::vector<double>& want, const char* what) {
      for (size_t k = 0; k < want.size(); ++k) {
        const double v = got.values<double>()[k];
        if (std::isnan(want[k])) EXPECT_TRUE(std::isnan(v)) << what << " element " << k << ": " << v;
        else if (std::isinf(want[k])) EXPECT_EQ(v, want[k]) << what << " element " << k;
        else EXPECT_NEAR(v, want[k], 1e-15) << what << " element " << k;
      }
    };
    expect(value.array(), y, "a^b");
    expect(dp.array(), da, "d/da");
    expect(dq.array(), db, "d/db");
  }
}

}  // namespace
}  // namespace spmd
