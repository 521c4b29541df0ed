// Our own CPU kernels' ISA copies (runtime/cpu/OwnIsa.h): every kernel case that reaches our
// code (the Winograd transforms and grouped GEMMs, the single-channel filter gradient, the blocked
// BatchNorm statistics and backward, the blocked channel sums, f32 <-> bf16, the f32 softmax and
// cross-entropy rows with their own exp, GELU and its gradient in double) gives the portable copy's bits on AVX2 and on AVX-512,
// where this CPU has them, and the copy asked for is the one that ran (each copy marks that it
// ran). The cap's own rules: it never raises the CPU's ISA.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "KernelCases.h"
#include "TestUtil.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/OwnExp.h"
#include "runtime/cpu/OwnGelu.h"
#include "runtime/cpu/OwnGemm.h"
#include "runtime/cpu/OwnIsa.h"

namespace spmd::runtime {
namespace {

using cpu::OwnIsa;

// Restores the cap a test changed.
class IsaCap {
 public:
  explicit IsaCap(OwnIsa isa) : previous_(cpu::setOwnIsaCap(isa)) {}
  ~IsaCap() { cpu::setOwnIsaCap(previous_); }

 private:
  std::optional<OwnIsa> previous_;
};

// The pins under which each op's own variants run (conv cases: each of our convolutions in turn).
std::vector<std::string> pinsFor(const std::string& op) {
  if (op == "conv2d" || op == "conv2d_backward_data")
    return {op + ":winograd_grouped", op + ":winograd_chunked", op + ":winograd_4x4", op + ":direct_f64"};
  if (op == "conv2d_backward_filter")
    return {op + ":winograd_grouped", op + ":winograd_chunked", op + ":winograd_4x4", op + ":single_channel",
            op + ":direct_f64"};
  return {""};
}

std::vector<OwnIsa> vectorIsas() {
  std::vector<OwnIsa> isas;
  for (OwnIsa isa : {OwnIsa::avx2, OwnIsa::avx512})
    if (isa <= cpu::cpuOwnIsa()) isas.push_back(isa);
  return isas;
}

// The kernel cases, and f32 <-> bf16 conversions (the kernel cases' convert is f32 <-> f64).
std::vector<KernelCase> cases() {
  std::vector<KernelCase> list = kernelCases(DType::f32);
  for (const KernelCase& c : kernelCases(DType::f64)) list.push_back(c);
  list.push_back({"convert to bf16", "convert", {spmd::testing::randomArray(DType::f32, {3, 70}, 7, -5, 5)},
                  {{DType::bf16, {3, 70}}}, {}});
  list.push_back({"convert from bf16", "convert", {spmd::testing::randomArray(DType::bf16, {3, 70}, 8, -5, 5)},
                  {{DType::f32, {3, 70}}}, {}});
  return list;
}

// The variant that ran ("name: why"): its name.
std::string variantName(const std::string& ran) { return ran.substr(0, ran.find(':')); }

TEST(OwnIsaTest, EveryCopyGivesThePortableBits) {
  const std::vector<OwnIsa> isas = vectorIsas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has neither AVX2 with FMA nor AVX-512: the portable copy only";
  std::map<OwnIsa, std::set<std::string>> reached;  // ops whose cases ran each copy
  int compared = 0;
  for (const KernelCase& c : cases())
    for (const std::string& pins : pinsFor(c.op)) {
      SCOPED_TRACE(c.name + " pinned '" + pins + "'");
      PinnedKernels pin(pins);
      std::vector<Array> portable;
      std::string portableRan;
      {
        IsaCap cap(OwnIsa::portable);
        portable = runKernel(cpuKernels(), c, &portableRan);
      }
      // A pin where its variant does not run leaves the choice to timing, which may differ by
      // ISA (the choice's key names it) and so give other bits: those pairs are not compared.
      const std::string pinned = pins.empty() ? "" : pins.substr(pins.find(':') + 1);
      if (!pinned.empty() && variantName(portableRan) != pinned) continue;
      for (OwnIsa isa : isas) {
        SCOPED_TRACE(cpu::ownIsaName(isa));
        IsaCap cap(isa);
        cpu::clearOwnIsaRuns();
        std::string ran;
        std::vector<Array> vector = runKernel(cpuKernels(), c, &ran);
        if (variantName(ran) != variantName(portableRan)) continue;  // timed differently (matmul)
        if (cpu::ownIsaRan(isa)) reached[isa].insert(c.op);
        ++compared;
        ASSERT_EQ(vector.size(), portable.size());
        for (size_t i = 0; i < vector.size(); ++i) {
          ASSERT_EQ(vector[i].bytes(), portable[i].bytes());
          EXPECT_EQ(std::memcmp(vector[i].data(), portable[i].data(), vector[i].bytes()), 0)
              << "output " << i << " (" << ran << ")";
        }
      }
    }
  EXPECT_GT(compared, 100);
  // Every op family with our own vector code reached each copy.
  for (OwnIsa isa : isas)
    for (const char* op : {"conv2d", "conv2d_backward_data", "conv2d_backward_filter", "batch_norm_train",
                           "batch_norm_train_backward", "reduce_sum", "convert", "softmax", "log_softmax",
                           "softmax_cross_entropy", "softmax_cross_entropy_backward", "gelu", "gelu_backward",
                           "fused"})
      EXPECT_TRUE(reached[isa].count(op)) << op << " never ran our " << cpu::ownIsaName(isa) << " copy";
}

// The f32 exp of our softmax rows (cpu/OwnExp.h) against e^x in double rounded once: within 1
// ulp over a sweep of its whole range and its edges, inf, 0 and NaN where e^x is, and the same bits
// on every copy.
TEST(OwnIsaTest, OwnExpIsWithinOneUlpAndTheSameOnEveryCopy) {
  std::vector<float> x;
  for (int i = 0; i <= 400000; ++i) x.push_back(-104.0f + 193.0f * float(i) / 400000.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 88.72f, 88.73f, -87.3f, -103.9f, -103.98f, -150.0f, 1e4f, -1e4f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    x.push_back(v);
  std::vector<float> portable(x.size());
  {
    IsaCap cap(OwnIsa::portable);
    cpu::ownExpValues(x.data(), portable.data(), int64_t(x.size()));
  }
  int64_t worst = 0;
  float worstAt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = float(std::exp(double(x[i])));
    if (std::isnan(want) || std::isinf(want) || want == 0.0f) {
      EXPECT_TRUE(std::isnan(want) ? std::isnan(portable[i]) : portable[i] == want)
          << "exp(" << x[i] << ") = " << portable[i] << ", want " << want;
      continue;
    }
    int32_t a, b;
    std::memcpy(&a, &portable[i], 4);
    std::memcpy(&b, &want, 4);
    if (std::abs(int64_t(a) - b) > worst) worst = std::abs(int64_t(a) - b), worstAt = x[i];
  }
  EXPECT_LE(worst, 1) << "at x = " << worstAt;
  for (OwnIsa isa : vectorIsas()) {
    IsaCap cap(isa);
    std::vector<float> vector(x.size());
    cpu::ownExpValues(x.data(), vector.data(), int64_t(x.size()));
    EXPECT_EQ(std::memcmp(vector.data(), portable.data(), x.size() * sizeof(float)), 0) << cpu::ownIsaName(isa);
  }
}

// The f32 GELU of our CPU kernels (cpu/OwnGelu.h) against the exact value in long double: its
// erfc, gelu(x) = x erfc(-x / sqrt 2) / 2 and gelu'(x) = Phi(x) + x phi(x) within 0.6 ulp over
// [-40, 40] and its edges (inf, NaN, values that underflow), gelu' within 1e-9 near its root at
// -0.7518 (where it passes 0 and any error is many ulps), and the same bits on every copy.
TEST(OwnIsaTest, OwnGeluIsWithinAnUlpAndTheSameOnEveryCopy) {
  std::vector<float> x, ones;
  for (int i = 0; i <= 400000; ++i) x.push_back(-40.0f + 80.0f * float(i) / 400000.0f);
  for (float v = 1e-30f; v < 1.0f; v *= 1.7f) x.push_back(v), x.push_back(-v);
  for (float v : {0.0f, -0.0f, -0.7517915f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                  -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    x.push_back(v);
  ones.assign(x.size(), 1.0f);
  const int64_t n = int64_t(x.size());
  std::vector<float> erfc(x.size()), gelu(x.size()), grad(x.size());
  {
    IsaCap cap(OwnIsa::portable);
    cpu::ownErfcValues(x.data(), erfc.data(), n);
    cpu::ownGeluValues(x.data(), gelu.data(), n);
    cpu::ownGeluBackwardValues(ones.data(), x.data(), grad.data(), n);
  }
  // Units in the last place of `exact` rounded to f32 (its subnormal step below the normal range).
  auto ulps = [](float v, long double exact) {
    const float want = float(exact);
    if ((std::isnan(v) && std::isnan(want)) || v == want) return 0.0L;
    if (!std::isfinite(v) || !std::isfinite(want)) return (long double)INFINITY;
    int e = 0;
    std::frexp(want, &e);
    return std::fabs(v - exact) / std::ldexp(1.0L, std::max(e, -125) - 24);
  };
  const long double rootHalf = std::sqrt(0.5L), invRootTwoPi = 1 / std::sqrt(2 * 3.14159265358979323846264L);
  long double worst[3] = {}, nearRoot = 0;
  float worstAt[3] = {};
  for (size_t i = 0; i < x.size(); ++i) {
    const long double v = x[i], phi = std::erfc(-v * rootHalf) / 2;
    const long double exact[3] = {std::erfc(v), v * phi, phi + v * std::exp(-v * v / 2) * invRootTwoPi};
    const float ours[3] = {erfc[i], gelu[i], grad[i]};
    for (int k = 0; k < 3; ++k) {
      if (k == 2 && std::fabs(v + 0.7518L) < 0.01L) {
        nearRoot = std::max(nearRoot, std::fabs(ours[k] - exact[k]));
        continue;
      }
      const long double u = ulps(ours[k], exact[k]);
      if (!(u <= worst[k])) worst[k] = u, worstAt[k] = x[i];
    }
  }
  EXPECT_LE(worst[0], 0.6L) << "erfc at x = " << worstAt[0];
  EXPECT_LE(worst[1], 0.6L) << "gelu at x = " << worstAt[1];
  EXPECT_LE(worst[2], 0.6L) << "gelu' at x = " << worstAt[2];
  EXPECT_LE(nearRoot, 1e-9L) << "gelu' near its root";
  for (OwnIsa isa : vectorIsas()) {
    IsaCap cap(isa);
    std::vector<float> again(x.size());
    cpu::ownErfcValues(x.data(), again.data(), n);
    EXPECT_EQ(std::memcmp(again.data(), erfc.data(), x.size() * sizeof(float)), 0) << cpu::ownIsaName(isa);
    cpu::ownGeluValues(x.data(), again.data(), n);
    EXPECT_EQ(std::memcmp(again.data(), gelu.data(), x.size() * sizeof(float)), 0) << cpu::ownIsaName(isa);
    cpu::ownGeluBackwardValues(ones.data(), x.data(), again.data(), n);
    EXPECT_EQ(std::memcmp(again.data(), grad.data(), x.size() * sizeof(float)), 0) << cpu::ownIsaName(isa);
  }
}

// The own GEMM (cpu/OwnGemm.h) on shapes that cross every edge of its blocking: tiles past the
// rows and columns, sums of several 256-term slices, two row blocks and two column blocks, batches,
// both transposes, a bias, an empty sum. Each element within the bound of a k-term f32 sum of
// the double product, and the same bits on every copy (the portable one included) and thread count.
TEST(OwnIsaTest, OwnGemmIsCloseToDoubleAndTheSameOnEveryCopyAndThreadCount) {
  struct Shape {
    int64_t batch, m, n, k;
    bool ta, tb, bias;
  };
  const Shape shapes[] = {{1, 1, 1, 1, false, false, false},  {1, 7, 13, 5, true, false, true},
                          {2, 37, 70, 300, false, true, true}, {1, 150, 33, 513, true, true, false},
                          {1, 5, 1100, 20, false, false, true}, {3, 3, 4, 0, false, false, true},
                          {1, 290, 48, 64, false, false, false}};
  const int threads = omp_get_max_threads();
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    SCOPED_TRACE(::testing::Message() << "batch " << s.batch << " m " << s.m << " n " << s.n << " k " << s.k
                                    << (s.ta ? " A^T" : "") << (s.tb ? " B^T" : "") << (s.bias ? " bias" : ""));
    std::vector<float> a(s.batch * s.m * s.k), b(s.batch * s.k * s.n), bias(s.n);
    for (std::vector<float>* v : {&a, &b, &bias})
      for (float& x : *v) x = uniform(rng);
    cpu::GemmOperands g;
    g.batch = s.batch, g.m = s.m, g.n = s.n, g.k = s.k;
    g.a = a.data(), g.aBatch = s.m * s.k, g.aRow = s.ta ? 1 : s.k, g.aCol = s.ta ? s.m : 1;
    g.b = b.data(), g.bBatch = s.k * s.n, g.bRow = s.tb ? 1 : s.n, g.bCol = s.tb ? s.k : 1;
    g.bias = s.bias ? bias.data() : nullptr;
    auto run = [&](OwnIsa isa, int threadCount) {
      std::vector<float> c(s.batch * s.m * s.n, std::numeric_limits<float>::quiet_NaN());
      g.c = c.data();
      IsaCap cap(isa);
      cpu::clearOwnIsaRuns();
      omp_set_num_threads(threadCount);
      cpu::ownGemm(g);
      omp_set_num_threads(threads);
      EXPECT_TRUE(cpu::ownIsaRan(isa)) << cpu::ownIsaName(isa);
      return c;
    };
    const std::vector<float> portable = run(OwnIsa::portable, 1);
    const double u = std::ldexp(1.0, -24);
    for (int64_t e = 0; e < s.batch; ++e)
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double exact = s.bias ? bias[j] : 0.0, magnitude = std::abs(exact);
          for (int64_t p = 0; p < s.k; ++p) {
            const double term = double(a[e * s.m * s.k + (s.ta ? p * s.m + i : i * s.k + p)]) *
                                b[e * s.k * s.n + (s.tb ? j * s.k + p : p * s.n + j)];
            exact += term;
            magnitude += std::abs(term);
          }
          const float got = portable[(e * s.m + i) * s.n + j];
          ASSERT_LE(std::abs(got - exact), (s.k + 2) * u * magnitude) << "element " << e << ", " << i << ", " << j;
        }
    for (OwnIsa isa : vectorIsas())
      for (int threadCount : {1, 2, 3}) {
        const std::vector<float> vector = run(isa, threadCount);
        EXPECT_EQ(std::memcmp(vector.data(), portable.data(), portable.size() * sizeof(float)), 0)
            << cpu::ownIsaName(isa) << " on " << threadCount << " threads";
      }
  }
}

TEST(OwnIsaTest, TheCapLowersTheIsaAndNeverRaisesIt) {
  const OwnIsa widest = cpu::cpuOwnIsa();
  for (OwnIsa isa : {OwnIsa::portable, OwnIsa::avx2, OwnIsa::avx512}) {
    IsaCap cap(isa);
    EXPECT_EQ(cpu::ownIsa(), std::min(isa, widest)) << cpu::ownIsaName(isa);
  }
  EXPECT_STREQ(cpu::ownIsaName(OwnIsa::avx512), "avx512");
  EXPECT_STREQ(cpu::ownIsaName(OwnIsa::portable), "portable");
}

}  // namespace
}  // namespace spmd::runtime
