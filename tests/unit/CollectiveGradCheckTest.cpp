// VJPs of the collectives against central finite differences in float64, across 3 replicas.
// Replica r computes loss_r = sum(op(x_r) * c_r) with its own random cotangent c_r; under pmap
// semantics (each replica seeds its own loss) the gradient replica r returns must be
// d/dx_r of J = sum over r of loss_r, which the finite differences measure by perturbing one
// element of one replica's input at a time:
//   (J(x + h e) - J(x - h e)) / 2h,  h = 1e-6,  max |fd - ad| / max |ad| < 1e-7.
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::allAxes;
using spmd::testing::cloneArray;
using spmd::testing::randomArray;

constexpr int kReplicas = 3;

struct CollectiveCase {
  std::string op, name;
  Shape shape;  // one replica's input
  std::function<Tensor(const Tensor&)> f;
};

TEST(CollectiveGradCheckTest, EveryCollectiveVjpMatchesFiniteDifferencesAcrossReplicas) {
  const std::vector<CollectiveCase> cases = {
      {"all_reduce", "psum", {2, 3}, [](const Tensor& x) { return psum(x, "batch"); }},
      {"all_reduce", "pmean", {2, 3}, [](const Tensor& x) { return pmean(x, "batch"); }},
      {"all_reduce", "pmax", {4}, [](const Tensor& x) { return pmax(x, "batch"); }},
      {"all_reduce", "pmin", {4}, [](const Tensor& x) { return pmin(x, "batch"); }},
      {"all_reduce", "psum of x*x (varying cotangent path)", {3},
       [](const Tensor& x) { return mul(psum(mul(x, x), "batch"), x); }},
      {"all_gather", "allGather", {2, 2}, [](const Tensor& x) { return allGather(x, "batch"); }},
      {"reduce_scatter", "psumScatter", {kReplicas, 2},
       [](const Tensor& x) { return psumScatter(x, "batch"); }},
      {"all_to_all", "allToAll rows to columns", {kReplicas * 2, 2},
       [](const Tensor& x) { return mul(allToAll(x, "batch", 0, 1), allToAll(x, "batch", 0, 1)); }},
      // A partial permutation: replica 0 receives nothing (zeros), replica 2 sends nothing.
      {"ppermute", "ppermute 0->1->2", {2, 2},
       [](const Tensor& x) { return mul(ppermute(x, "batch", {{0, 1}, {1, 2}}), x); }},
  };
  std::set<std::string> exercised;
  uint64_t seed = 77;
  for (const CollectiveCase& c : cases) {
    SCOPED_TRACE(c.name);
    Shape stacked = c.shape;
    stacked.insert(stacked.begin(), kReplicas);
    Array x = randomArray(DType::f64, stacked, seed++, -1, 1);
    Shape outShape;
    // loss_r and its gradient, both per replica (mapped outputs: nothing is averaged).
    auto step = pmap(
        [&](const Tensor& xr, const Tensor& cr) {
          return value_and_grad([&](const Tensor& v) { return sum(mul(c.f(v), cr), allAxes(cr)); })(xr);
        },
        {.inAxes = {0, 0}, .outAxes = {0, 0}, .devices = "cpu:" + std::to_string(kReplicas)});
    // The cotangent's shape is op(x_r)'s: trace once with a probe to learn it.
    auto probe = pmap([&](const Tensor& xr) { return c.f(xr); },
                      {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:" + std::to_string(kReplicas)});
    Array cot = randomArray(DType::f64, probe(x).shape(), seed++, -1, 1);
    auto total = [&](const Array& at) {
      auto [losses, grads] = step(at, cot);
      double j = 0;
      for (double l : losses.array().values<double>()) j += l;
      return j;
    };
    auto [losses, grads] = step(x, cot);
    const auto ad = grads.array().values<double>();
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      Array plus = cloneArray(x), minus = cloneArray(x);
      plus.values<double>()[i] += 1e-6;
      minus.values<double>()[i] -= 1e-6;
      double fd = (total(plus) - total(minus)) / 2e-6;
      worst = std::max(worst, std::abs(fd - ad[i]));
      scale = std::max(scale, std::abs(ad[i]));
    }
    std::printf("  %-40s max|fd - ad| / max|ad| = %.2e\n", c.name.c_str(), worst / scale);
    EXPECT_GT(scale, 0.0);
    EXPECT_LT(worst / scale, 1e-7);
    if (step.lastTracedIr().find("spmd." + c.op) != std::string::npos) exercised.insert(c.op);
  }
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "ppermute", "all_to_all"})
    EXPECT_TRUE(exercised.count(op)) << "no finite-difference case exercises spmd." << op;
}

}  // namespace
}  // namespace spmd
