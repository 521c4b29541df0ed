// spmd::Mesh and spmd::shardMap (frontend/Mesh.h): the mesh's coordinates and groups; arguments
// cut and results put together by their PartitionSpecs; collectives over mesh axes against host
// arithmetic on meshes 1x4, 2x2, 4x1 and 2x3; a tensor-parallel MLP (column- then row-parallel
// matmuls, one psum over "model") on a 2x2 mesh, data-parallel over "data", trained for several
// steps against the same MLP on one device in f64, and likewise FSDP written by hand within a
// data-parallel mesh and an expert-parallel mixture; a pmap inside a shardMap body over one of its axes; bad meshes, specs and
// results are errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "TestUtil.h"
#include "TransformerBlock.h"
#include "frontend/models/TensorParallelMlp.h"
#include "frontend/spmd.h"
#include "runtime/exec/DeviceArray.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;
using spmd::testing::randomArray;

TEST(MeshTest, CoordinatesAndGroupsAreRowMajor) {
  Mesh mesh({{"data", 2}, {"model", 3}});
  EXPECT_EQ(mesh.size(), 6);
  EXPECT_EQ(mesh.describe(), "{data: 2, model: 3}");
  EXPECT_EQ(mesh.coordinate(4, "data"), 1);
  EXPECT_EQ(mesh.coordinate(4, "model"), 1);
  EXPECT_EQ(mesh.groups("model"), (AxisGroups{{0, 1, 2}, {3, 4, 5}}));
  EXPECT_EQ(mesh.groups("data"), (AxisGroups{{0, 3}, {1, 4}, {2, 5}}));
  EXPECT_NE(errorOf([] { Mesh({{"data", 2}, {"data", 2}}); }).find("axis 'data' is named twice"), std::string::npos);
  EXPECT_NE(errorOf([] { Mesh({{"data", 0}}); }).find("axis 'data' has size 0"), std::string::npos);
  EXPECT_NE(errorOf([] { Mesh({{"", 2}}); }).find("an axis has no name"), std::string::npos);
  EXPECT_NE(errorOf([] { Mesh({}); }).find("MeshTest.cpp:"), std::string::npos);
}

// Every replica (a, b) gets x[a, b, :] (small integers: every fold is exact, so the host's sums
// are the bits); each collective's result is checked against the host over each axis.
void expectMeshCollectives(int64_t A, int64_t B) {
  SCOPED_TRACE(std::to_string(A) + "x" + std::to_string(B));
  const int64_t d = 3;
  Mesh mesh({{"a", A}, {"b", B}});
  auto f = shardMap(
      [](const Tensor& x) {
        Tensor ia = cast(axisIndex("a"), DType::f32), ib = cast(axisIndex("b"), DType::f32);
        return std::tuple{psum(x, "a"), pmax(x, "b"), pmean(x, "b"), allGather(x, "b"),
                          ppermute(x, "b", {{0, axisSize("b") - 1}}), reshape(ia * 10.0 + ib, {1, 1}), psum(x, "mesh")};
      },
      mesh,
      {.inSpecs = {{"a", "b"}},
       .outSpecs = {{"", "b"}, {"a"}, {"a"}, {"a"}, {"a", "b"}, {"a", "b"}, {}},
       .pmap = {.axisName = "mesh", .devices = "cpu:" + std::to_string(A * B)}});
  std::vector<float> xv;
  for (int64_t i = 0; i < A * B * d; ++i) xv.push_back(float((i * 7) % 11) - 5.f);
  auto [sumA, maxB, meanB, gatherB, shifted, index, all] = f(Array::of<float>({A, B, d}, xv));
  auto x = [&](int64_t a, int64_t b, int64_t k) { return xv[size_t((a * B + b) * d + k)]; };
  ASSERT_EQ(sumA.shape(), (Shape{1, B, d}));
  ASSERT_EQ(maxB.shape(), (Shape{A, 1, d}));
  ASSERT_EQ(gatherB.shape(), (Shape{A * B, 1, 1, d}));  // per replica [B, 1, 1, d], split over "a" on dim 0
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < d; ++k) {
      float s = 0;
      for (int64_t a = 0; a < A; ++a) s += x(a, b, k);
      EXPECT_EQ(sumA.array().values<float>()[size_t(b * d + k)], s);
    }
  for (int64_t a = 0; a < A; ++a)
    for (int64_t k = 0; k < d; ++k) {
      float m = -1e9f, s = 0;
      for (int64_t b = 0; b < B; ++b) m = std::max(m, x(a, b, k)), s += x(a, b, k);
      EXPECT_EQ(maxB.array().values<float>()[size_t(a * d + k)], m);
      EXPECT_NEAR(meanB.array().values<float>()[size_t(a * d + k)], s / float(B), 1e-6);
      for (int64_t b = 0; b < B; ++b) EXPECT_EQ(gatherB.array().values<float>()[size_t((a * B + b) * d + k)], x(a, b, k));
      for (int64_t b = 0; b < B; ++b)  // coordinate B-1 gets coordinate 0's x, the others zeros
        EXPECT_EQ(shifted.array().values<float>()[size_t((a * B + b) * d + k)], b == B - 1 ? x(a, 0, k) : (B == 1 ? x(a, 0, k) : 0.f));
    }
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b) EXPECT_EQ(index.array().values<float>()[size_t(a * B + b)], float(a * 10 + b));
  ASSERT_EQ(all.shape(), (Shape{1, 1, d}));
  for (int64_t k = 0; k < d; ++k) {
    float s = 0;
    for (int64_t a = 0; a < A; ++a)
      for (int64_t b = 0; b < B; ++b) s += x(a, b, k);
    EXPECT_EQ(all.array().values<float>()[size_t(k)], s);
  }
}

// allToAll over mesh axis "b": the replica at coordinate b gets chunk b (2 elements) of the x of
// every replica of its "b" group, in coordinate order; over "a" alike with chunk a.
void expectMeshAllToAll(int64_t A, int64_t B) {
  SCOPED_TRACE(std::to_string(A) + "x" + std::to_string(B) + " allToAll");
  Mesh mesh({{"a", A}, {"b", B}});
  const int64_t n = 2 * A * B;  // each replica's x: n values, 2 per chunk over either axis
  auto f = shardMap([](const Tensor& x) { return std::tuple{allToAll(x, "b", 2, 2), allToAll(x, "a", 2, 2)}; }, mesh,
                    {.inSpecs = {{"a", "b"}}, .outSpecs = {{"a", "b"}, {"a", "b"}},
                     .pmap = {.axisName = "mesh", .devices = "cpu:" + std::to_string(A * B)}});
  std::vector<float> xv;
  for (int64_t r = 0; r < A * B; ++r)
    for (int64_t k = 0; k < n; ++k) xv.push_back(float(100 * r + k));
  auto [overB, overA] = f(Array::of<float>({A, B, n}, xv));
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t r = a * B + b;
      for (int64_t j = 0; j < B; ++j)  // from (a, j): its chunk b of n / B
        for (int64_t k = 0; k < n / B; ++k)
          EXPECT_EQ(overB.array().values<float>()[size_t(r * n + j * (n / B) + k)],
                    float(100 * (a * B + j) + b * (n / B) + k));
      for (int64_t i = 0; i < A; ++i)  // from (i, b): its chunk a of n / A
        for (int64_t k = 0; k < n / A; ++k)
          EXPECT_EQ(overA.array().values<float>()[size_t(r * n + i * (n / A) + k)],
                    float(100 * (i * B + b) + a * (n / A) + k));
    }
}

TEST(MeshTest, CollectivesOverMeshAxesMatchTheHost) {
  expectMeshAllToAll(2, 2);
  expectMeshAllToAll(1, 4);
  expectMeshAllToAll(4, 1);
  expectMeshAllToAll(2, 3);
  expectMeshCollectives(2, 2);
  expectMeshCollectives(1, 4);
  expectMeshCollectives(4, 1);
  expectMeshCollectives(2, 3);
}

// Collectives over several axes of a {s: 2, d: 2, m: 2} mesh (Axes{...}, jax's tuple axis names):
// each group is the replicas sharing the unlisted axes' coordinates, ordered by the listed axes'
// (the first listed the slowest); sums, gathers, scatters, positions and sizes against the host
// (small integers: exact in any order); bad lists are errors at the caller's line.
TEST(MeshTest, CollectivesOverSeveralAxesFoldWithinTheirGroups) {
  Mesh mesh({{"s", 2}, {"d", 2}, {"m", 2}});  // replica = 4 s + 2 d + m
  EXPECT_EQ(mesh.groups(std::vector<std::string>{"d", "m"}), (AxisGroups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(mesh.groups(std::vector<std::string>{"m", "d"}), (AxisGroups{{0, 2, 1, 3}, {4, 6, 5, 7}}));
  EXPECT_EQ(mesh.groups(std::vector<std::string>{"s", "m"}), (AxisGroups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(mesh.groups(std::vector<std::string>{"d"}), mesh.groups("d"));
  const int64_t k = 3;
  auto f = shardMap(
      [&](const Tensor& x) {
        EXPECT_EQ(axisSize(Axes{"d", "m"}), 4);
        const Tensor v = reshape(x, {k});
        Tree t;
        t.set("v", v * 2.0);
        const Tensor rows = concat({reshape(v, {1, k}), reshape(v, {1, k}) + 100.0, reshape(v, {1, k}) + 200.0,
                                    reshape(v, {1, k}) + 300.0}, 0);  // [4, k]: row p = v + 100 p
        return std::tuple{reshape(psum(v, Axes{"d", "m"}), {1, k}), reshape(pmax(v, Axes{"s", "m"}), {1, k}),
                          allGather(v, Axes{"m", "d"}), reshape(psumScatter(rows, Axes{"m", "d"}), {1, 1, 1, k}),
                          reshape(axisIndex(Axes{"m", "d"}), {1, 1}), reshape(pmean(t, Axes{"d", "m"}).at("v"), {1, k})};
      },
      mesh,
      {.inSpecs = {{"s", "d", "m"}},
       .outSpecs = {{"s"}, {"d"}, {"s"}, {"s", "d", "m"}, {"d", "m"}, {"s"}},
       .pmap = {.axisName = "mesh", .devices = "cpu:8"}});
  std::vector<float> xv;
  for (int64_t i = 0; i < 8 * k; ++i) xv.push_back(float((i * 7) % 11) - 5.f);
  auto x = [&](int64_t r, int64_t j) { return double(xv[size_t(r * k + j)]); };
  auto [sums, maxes, gathered, scattered, positions, means] = f(Array::of<float>({2, 2, 2, k}, xv));
  auto at = [](const Tensor& t, int64_t i) { return double(t.array().values<float>()[size_t(i)]); };
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t s = 0; s < 2; ++s) {
      double sum = 0;
      for (int64_t r = 4 * s; r < 4 * s + 4; ++r) sum += x(r, j);
      EXPECT_EQ(at(sums, s * k + j), sum) << "psum over (d, m), s = " << s;
      EXPECT_EQ(at(means, s * k + j), 2 * sum / 4) << "pmean of a Tree over (d, m), s = " << s;
      const int64_t order[4] = {0, 2, 1, 3};  // (m, d): m the slowest
      for (int64_t p = 0; p < 4; ++p) {
        EXPECT_EQ(at(gathered, (s * 4 + p) * k + j), x(4 * s + order[p], j)) << "allGather over (m, d) row " << p;
        // The member at position p gets the sum over its group of row p (v + 100 p).
        double rowSum = 0;
        for (int64_t r = 4 * s; r < 4 * s + 4; ++r) rowSum += x(r, j) + 100.0 * double(p);
        EXPECT_EQ(at(scattered, (4 * s + order[p]) * k + j), rowSum) << "psumScatter over (m, d), position " << p;
      }
    }
    for (int64_t d = 0; d < 2; ++d)
      EXPECT_EQ(at(maxes, d * k + j), std::max({x(2 * d, j), x(2 * d + 1, j), x(4 + 2 * d, j), x(5 + 2 * d, j)}))
          << "pmax over (s, m), d = " << d;
  }
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t m = 0; m < 2; ++m)
      EXPECT_EQ(positions.array().values<int32_t>()[size_t(d * 2 + m)], int32_t(m * 2 + d)) << "axisIndex over (m, d)";
  auto refusal = [&](Axes axes) {
    return errorOf([&] {
      shardMap([&](const Tensor& v) { return psum(v, axes); }, mesh,
               {.inSpecs = {{"s", "d", "m"}}, .outSpecs = {{"s", "d", "m"}}, .pmap = {.axisName = "mesh", .devices = "cpu:8"}})(
          Array::of<float>({2, 2, 2, k}, xv));
    });
  };
  // The sum over (d, m) still varies over s: a spec that leaves s whole is refused, naming it.
  const std::string whole = errorOf([&] {
    shardMap([&](const Tensor& v) { return psum(v, Axes{"d", "m"}); }, mesh,
             {.inSpecs = {{"s", "d", "m"}}, .outSpecs = {{}}, .pmap = {.axisName = "mesh", .devices = "cpu:8"}})(
        Array::of<float>({2, 2, 2, k}, xv));
  });
  EXPECT_NE(whole.find("varies over mesh axis 's'"), std::string::npos) << whole;
  EXPECT_EQ(whole.find("varies over mesh axis 'd'"), std::string::npos) << whole;
  EXPECT_NE(refusal(Axes{"d", "q"}).find("'q' is not an axis of the mesh {s: 2, d: 2, m: 2}"), std::string::npos);
  EXPECT_NE(refusal(Axes{"d", "d"}).find("axis 'd' is listed twice"), std::string::npos);
  EXPECT_NE(refusal(Axes(std::vector<std::string>{})).find("no axis is listed"), std::string::npos);
  const std::string outside = errorOf([] {
    pmap([](const Tensor& v) { return psum(v, Axes{"a", "b"}); }, {.devices = "cpu:2"})(Array::zeros(DType::f32, {2, 1}));
  });
  EXPECT_NE(outside.find("MeshTest.cpp:"), std::string::npos) << outside;
  EXPECT_NE(outside.find("no spmd::shardMap is being traced"), std::string::npos) << outside;
}

// Megatron's MLP on a {data: 2, model: 2} mesh (frontend/models/TensorParallelMlp.h: w1 split by
// columns, b1 and w2 by rows over "model", one psum over "model", the batch split over "data",
// each parameter's gradient summed over the replicas holding a copy of it): the loss and the
// parameters after each of 3 SGD steps match the unsharded MLP on one device in f64 (1e-12 of
// the largest value) and in f32 (1e-5).
void expectTensorParallelMatches(DType dtype, double tolerance) {
  SCOPED_TRACE(dtypeName(dtype));
  const int64_t batch = 8, in = 6, hidden = 8, out = 4;
  const double lr = 0.1;
  Array x = randomArray(dtype, {batch, in}, 5), y = randomArray(dtype, {batch, out}, 6);
  auto reference = jit([&](const Tree& p, const Tensor& xs, const Tensor& ys) { return models::mlpStep(p, xs, ys, lr); });
  auto sharded = models::tensorParallelMlp(Mesh({{"data", 2}, {"model", 2}}), lr, {.axisName = "mesh", .devices = "cpu:4"});
  Tree whole = models::mlpInit(in, hidden, out, dtype, 1), parts = whole;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [next, loss] = reference(whole, x, y);
    auto [w1, b1, w2, b2, tpLoss] =
        sharded(parts.at("w1"), parts.at("b1"), parts.at("w2"), parts.at("b2"), Tensor(x), Tensor(y));
    auto number = [&](const Tensor& t, size_t i) {
      return dtype == DType::f64 ? t.array().values<double>()[i] : double(t.array().values<float>()[i]);
    };
    EXPECT_NEAR(number(tpLoss, 0), number(loss, 0), tolerance * std::abs(number(loss, 0)));
    parts = Tree();
    parts.set("w1", w1), parts.set("b1", b1), parts.set("w2", w2), parts.set("b2", b2);
    for (const auto& [name, t] : next) {
      ASSERT_EQ(parts.at(name).shape(), t.shape()) << name;
      double scale = 0;
      for (int64_t i = 0; i < t.numel(); ++i) scale = std::max(scale, std::abs(number(t, size_t(i))));
      for (int64_t i = 0; i < t.numel(); ++i)
        EXPECT_NEAR(number(parts.at(name), size_t(i)), number(t, size_t(i)), tolerance * scale) << name << "[" << i << "]";
    }
    whole = next;
  }
}

TEST(MeshTest, TensorParallelMlpMatchesTheUnshardedMlp) {
  expectTensorParallelMatches(DType::f64, 1e-12);
  expectTensorParallelMatches(DType::f32, 1e-5);
}

std::vector<std::byte> bytesOf(const Tensor& t) {
  const Array& a = t.array();
  return std::vector<std::byte>(a.data(), a.data() + a.bytes());
}

// FSDP within a data-parallel mesh written by hand, as in jax (hybrid sharding: {data: 2, fsdp: 2}
// on cpu:4): each parameter lies split over "fsdp" along its first axis, each replica gathers the
// whole within its fsdp group to use it (one all_gather with replica groups), whose transpose
// sums the members' gradients and hands each its rows (one reduce_scatter within the groups), and
// the psum over "data" (by hand, or sumGradients's) adds the data replicas'; the batch lies split
// over both axes. Three SGD steps match the MLP trained whole on one device (f64, 1e-12), the
// automatic sum the hand-written one bit for bit, and no collective spans the whole mesh.
TEST(MeshTest, FsdpWrittenByHandOnAMeshMatchesTheUnshardedMlp) {
  const int64_t batch = 8, in = 6, hidden = 8, out = 4;
  const double lr = 0.1;
  const Mesh mesh({{"data", 2}, {"fsdp", 2}});
  auto body = [&](bool automatic) {
    return [&, automatic](const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2, const Tensor& x,
                          const Tensor& y) {
      Tree shards;
      shards.set("w1", w1), shards.set("b1", b1), shards.set("w2", w2), shards.set("b2", b2);
      const std::map<std::string, Shape> shapes = {{"w1", {in, hidden}}, {"b1", {hidden}}, {"w2", {hidden, out}}, {"b2", {out}}};
      auto [share, g] = value_and_grad([&](const Tree& q) {
        Tree whole;
        for (const auto& [name, shard] : q) whole.set(name, reshape(allGather(shard, "fsdp"), shapes.at(name)));
        return models::mlpLoss(whole, reshape(x, {-1, in}), reshape(y, {-1, out})) / 4.0;  // a quarter of the batch
      })(shards);
      Tree next;
      for (const auto& [name, t] : shards) next.set(name, t - (automatic ? g.at(name) : psum(g.at(name), "data")) * lr);
      return std::tuple{next.at("w1"), next.at("b1"), next.at("w2"), next.at("b2"), psum(share, Axes{"data", "fsdp"})};
    };
  };
  auto options = [](bool automatic) {
    return ShardMapOptions{.inSpecs = {{"fsdp"}, {"fsdp"}, {"fsdp"}, {"fsdp"}, {"data", "fsdp"}, {"data", "fsdp"}},
                           .outSpecs = {{"fsdp"}, {"fsdp"}, {"fsdp"}, {"fsdp"}, {}},
                           .pmap = {.axisName = "mesh", .devices = "cpu:4"},
                           .sumGradients = automatic};
  };
  auto byHand = shardMap(body(false), mesh, options(false));
  auto automatic = shardMap(body(true), mesh, options(true));
  auto reference = jit([&](const Tree& p, const Tensor& xs, const Tensor& ys) { return models::mlpStep(p, xs, ys, lr); });
  Array x = randomArray(DType::f64, {batch, in}, 5), y = randomArray(DType::f64, {batch, out}, 6);
  // [data, fsdp, 2 rows, ...]: replica (d, f) holds rows 4 d + 2 f and the next.
  Array xs = Array::zeros(DType::f64, {2, 2, 2, in}), ys = Array::zeros(DType::f64, {2, 2, 2, out});
  std::copy_n(x.values<double>().begin(), x.numel(), xs.values<double>().begin());
  std::copy_n(y.values<double>().begin(), y.numel(), ys.values<double>().begin());
  Tree whole = models::mlpInit(in, hidden, out, DType::f64, 1);
  std::vector<Tensor> a{whole.at("w1"), whole.at("b1"), whole.at("w2"), whole.at("b2")}, b = a;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [next, loss] = reference(whole, Tensor(x), Tensor(y));
    auto [w1, b1, w2, b2, fsdpLoss] = byHand(a[0], a[1], a[2], a[3], Tensor(xs), Tensor(ys));
    auto [v1, c1, v2, c2, autoLoss] = automatic(b[0], b[1], b[2], b[3], Tensor(xs), Tensor(ys));
    a = {w1, b1, w2, b2}, b = {v1, c1, v2, c2};
    EXPECT_NEAR(fsdpLoss.array().values<double>()[0], loss.array().values<double>()[0],
                1e-12 * std::abs(loss.array().values<double>()[0]));
    EXPECT_EQ(bytesOf(fsdpLoss), bytesOf(autoLoss));
    const char* names[] = {"w1", "b1", "w2", "b2"};
    for (size_t i = 0; i < a.size(); ++i) {
      const Tensor& want = next.at(names[i]);
      ASSERT_EQ(a[i].shape(), want.shape()) << names[i];
      EXPECT_EQ(bytesOf(a[i]), bytesOf(b[i])) << names[i];
      for (int64_t k = 0; k < want.numel(); ++k)
        EXPECT_NEAR(a[i].array().values<double>()[k], want.array().values<double>()[k], 1e-12) << names[i] << "[" << k << "]";
    }
    whole = next;
  }
  // The gathers and scatters within the fsdp groups, the gradients' sums within the data groups;
  // only the loss's psum over both axes spans the whole mesh.
  std::map<std::string, int> collectives;
  for (const runtime::Step& step : byHand.lastProgram().steps) {
    if (step.op != "all_gather" && step.op != "reduce_scatter" && step.op != "all_reduce") continue;
    if (!step.attrs.count("group_size")) {
      EXPECT_EQ(step.op, "all_reduce") << step.where();
      ++collectives["over the whole mesh"];
      continue;
    }
    EXPECT_EQ(step.integer("group_size"), 2) << step.op << " at " << step.where();
    ++collectives[step.op];
  }
  EXPECT_GE(collectives["all_gather"], 1);
  EXPECT_GE(collectives["reduce_scatter"], 1);
  EXPECT_GE(collectives["all_reduce"], 1);
  EXPECT_EQ(collectives["over the whole mesh"], 1);
}

// Expert parallelism (GShard's dispatch by all_to_all) on {data: 2, expert: 2}: a dense mixture of
// two experts, expert e's weights on the replicas of expert coordinate e, every token sent to
// both experts by an allToAll over "expert" (one all_to_all within the expert groups), each
// expert's outputs sent back by another and combined by the gate. Three SGD steps (sumGradients)
// match the same layer on one device in f64 (1e-12): the exchanges' transposes route the
// gradients back within the groups.
TEST(MeshTest, ExpertParallelMixtureMatchesTheUnshardedLayer) {
  const int64_t experts = 2, tokens = 4, d = 3, replicas = 4;
  const double lr = 0.2;
  const Mesh mesh({{"data", 2}, {"expert", experts}});
  auto layer = [&](const Tensor& gate, const Tensor& outputs, const Tensor& targets) {  // outputs [E, T, d]
    Tensor y = einsum("te,etd->td", {gate, outputs});
    Tensor e = y - targets;
    return mean(e * e, {0, 1});
  };
  auto sharded = shardMap(
      [&](const Tensor& router, const Tensor& w, const Tensor& x, const Tensor& t) {
        Tree p;
        p.set("router", router), p.set("w", w);
        auto [share, g] = value_and_grad([&](const Tree& q) {
          const Tensor &r = q.at("router"), &we = q.at("w");
          const Tensor xs = reshape(x, {tokens, d});
          const Tensor gate = softmax(matmul(xs, r), -1);
          // [E, T, d]: a copy of this replica's tokens for each expert; received: each member's
          // tokens for this replica's expert.
          const Tensor received = allToAll(broadcastTo(reshape(xs, {1, tokens, d}), {experts, tokens, d}), "expert", 0, 0);
          const Tensor h = reshape(tanh(matmul(reshape(received, {experts * tokens, d}), reshape(we, {d, d}))),
                                   {experts, tokens, d});
          return layer(gate, allToAll(h, "expert", 0, 0), reshape(t, {tokens, d})) / double(replicas);
        })(p);
        return std::tuple{router - g.at("router") * lr, w - g.at("w") * lr, psum(share, Axes{"data", "expert"})};
      },
      mesh,
      {.inSpecs = {{}, {"expert"}, {"data", "expert"}, {"data", "expert"}},
       .outSpecs = {{}, {"expert"}, {}},
       .pmap = {.axisName = "mesh", .devices = "cpu:4"},
       .sumGradients = true});
  auto reference = jit([&](const Tensor& router, const Tensor& w, const Tensor& x, const Tensor& t) {
    Tree p;
    p.set("router", router), p.set("w", w);
    auto [loss, g] = value_and_grad([&](const Tree& q) {
      const Tensor &r = q.at("router"), &we = q.at("w");
      std::vector<Tensor> outs;
      for (int64_t e = 0; e < experts; ++e)
        outs.push_back(reshape(tanh(matmul(x, reshape(slice(we, {e, 0, 0}, {e + 1, d, d}), {d, d}))), {1, replicas * tokens, d}));
      return layer(softmax(matmul(x, r), -1), concat(outs, 0), t);
    })(p);
    return std::tuple{router - g.at("router") * lr, w - g.at("w") * lr, loss};
  });
  Array x = randomArray(DType::f64, {replicas * tokens, d}, 21), t = randomArray(DType::f64, {replicas * tokens, d}, 22);
  Array xs = Array::zeros(DType::f64, {2, experts, tokens, d}), ts = Array::zeros(DType::f64, {2, experts, tokens, d});
  std::copy_n(x.values<double>().begin(), x.numel(), xs.values<double>().begin());
  std::copy_n(t.values<double>().begin(), t.numel(), ts.values<double>().begin());
  Tensor router = Tensor(randomArray(DType::f64, {d, experts}, 23)), w = Tensor(randomArray(DType::f64, {experts, d, d}, 24));
  Tensor router1 = router, w1 = w;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [r, we, loss] = reference(router, w, Tensor(x), Tensor(t));
    auto [r1, we1, loss1] = sharded(router1, w1, Tensor(xs), Tensor(ts));
    EXPECT_NEAR(loss1.array().values<double>()[0], loss.array().values<double>()[0], 1e-12);
    for (auto [got, want] : {std::pair{r1, r}, std::pair{we1, we}}) {
      ASSERT_EQ(got.shape(), want.shape());
      for (int64_t i = 0; i < want.numel(); ++i)
        EXPECT_NEAR(got.array().values<double>()[i], want.array().values<double>()[i], 1e-12) << i;
    }
    router = r, w = we, router1 = r1, w1 = we1;
  }
  int exchanges = 0;
  for (const runtime::Step& step : sharded.lastProgram().steps)
    if (step.op == "all_to_all") {
      ++exchanges;
      EXPECT_EQ(step.integer("group_size"), experts) << step.where();
    }
  EXPECT_EQ(exchanges, 3);  // two forward, and the second's transpose (the tokens take no gradient)
}

// On {data: 2, expert: 2, copy: 2} (the "copy" replicas hold the same tokens), a gradient whose
// loss goes through an allToAll over "expert" varies over "data" and "expert" only, as the
// per-axis analysis finds while tracing: summed by hand over those two it is whole, and equal to
// sumGradients's sum over all three axes of an eighth of the loss.
TEST(MeshTest, AGradientThroughAnAllToAllIsWholeSummedOverTheAxesItVariesOver) {
  const int64_t tokens = 2, d = 3;
  const Mesh mesh({{"data", 2}, {"expert", 2}, {"copy", 2}});
  auto step = [&](bool automatic) {
    return shardMap(
        [&, automatic](const Tensor& router, const Tensor& x) {
          auto [loss, g] = value_and_grad([&](const Tensor& r) {
            const Tensor s = allToAll(matmul(reshape(x, {tokens, d}), r), "expert", 1, 0);  // [2 tokens, 2] -> [4, 1]
            return sum(s * s, {0, 1}) / (automatic ? 8.0 : 4.0);
          })(router);
          return automatic ? g : psum(g, Axes{"data", "expert"});
        },
        mesh,
        {.inSpecs = {{}, {"data", "expert"}}, .outSpecs = {{}}, .pmap = {.axisName = "mesh", .devices = "cpu:8"},
         .sumGradients = automatic});
  };
  const Tensor router(randomArray(DType::f64, {d, 2}, 31)), x(randomArray(DType::f64, {2, 2, tokens, d}, 32));
  const Tensor byHand = step(false)(router, x), summed = step(true)(router, x);
  ASSERT_EQ(byHand.shape(), summed.shape());
  double scale = 0;
  for (int64_t i = 0; i < summed.numel(); ++i) scale = std::max(scale, std::abs(summed.array().values<double>()[i]));
  EXPECT_GT(scale, 0.0);
  for (int64_t i = 0; i < summed.numel(); ++i)
    EXPECT_NEAR(byHand.array().values<double>()[i], summed.array().values<double>()[i], 1e-12 * scale) << i;
}

// The tensor-parallel MLP's parameters kept on the devices between steps (keepOnDevices, each
// replica its block, donated back into the next step): bound in place on every step after the
// first (the call's count), the same bits as the step that reads its results every call, and
// read whole only when asked. The Program's contract shows the mesh placements.
TEST(MeshTest, ResultsKeptOnTheDevicesAreBoundInPlaceWithTheSameBits) {
  const int64_t batch = 8, in = 6, hidden = 8, out = 4;
  const double lr = 0.1;
  const Mesh mesh({{"data", 2}, {"model", 2}});
  Array x = randomArray(DType::f32, {batch, in}, 5), y = randomArray(DType::f32, {batch, out}, 6);
  auto read = models::tensorParallelMlp(mesh, lr, {.axisName = "mesh", .devices = "cpu:4"});
  auto kept = shardMap(models::TensorParallelMlpBody{lr}, mesh,
                       {.inSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {"data"}, {"data"}},
                        .outSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {}},
                        .pmap = {.axisName = "mesh", .devices = "cpu:4", .donateArguments = {0, 1, 2, 3}},
                        .keepOnDevices = true});
  Tree init = models::mlpInit(in, hidden, out, DType::f32, 1);
  std::vector<Tensor> a{init.at("w1"), init.at("b1"), init.at("w2"), init.at("b2")}, b = a;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [w1, b1, w2, b2, loss] = read(a[0], a[1], a[2], a[3], Tensor(x), Tensor(y));
    auto [v1, c1, v2, c2, keptLoss] = kept(b[0], b[1], b[2], b[3], Tensor(x), Tensor(y));
    EXPECT_EQ(kept.lastCall().argumentsInPlace, step == 0 ? 0 : 4);
    for (const Tensor& t : {v1, c1, v2, c2, keptLoss}) {
      ASSERT_TRUE(t.onDevices());
      EXPECT_EQ(t.resident()->layout(), runtime::DeviceArray::Layout::Mesh);
    }
    a = {w1, b1, w2, b2}, b = {v1, c1, v2, c2};
    EXPECT_EQ(bytesOf(keptLoss), bytesOf(loss));
    EXPECT_EQ(v1.shape(), (Shape{in, hidden}));  // the whole value's shape; each replica holds [6, 4]
    EXPECT_EQ(v1.resident()->localShape(), (Shape{in, hidden / 2}));
  }
  // Read after the loop: the same bits as the parameters read every step.
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(bytesOf(b[i]), bytesOf(a[i])) << i;
  const std::string text = kept.lastProgram().toText();
  EXPECT_NE(text.find("input 0 %0 mesh {\"\", \"model\"} on {data: 2, model: 2}"), std::string::npos) << text;
  EXPECT_NE(text.find("mesh {\"data\"} on {data: 2, model: 2}"), std::string::npos) << text;
  EXPECT_NE(text.find("mesh {} on {data: 2, model: 2}"), std::string::npos) << text;
  // A value kept on the mesh passed where another spec is asked for is put together and cut
  // again (not bound in place): the same values as the host's.
  auto transpose = shardMap([](const Tensor& w) { return w; }, mesh,
                            {.inSpecs = {{"model"}}, .outSpecs = {{"model"}}, .pmap = {.axisName = "mesh", .devices = "cpu:4"}});
  Tensor again = transpose(b[0]);
  EXPECT_EQ(transpose.lastCall().argumentsInPlace, 0);
  EXPECT_EQ(bytesOf(again), bytesOf(a[0]));
  // A result whose blocks differ where its spec says whole is refused when read.
  auto varies = shardMap([](const Tensor& v) { return v + cast(axisIndex("model"), DType::f32); }, mesh,
                         {.inSpecs = {{"data"}}, .outSpecs = {{"data"}}, .pmap = {.axisName = "mesh", .devices = "cpu:4"},
                          .keepOnDevices = true, .checkVaries = false});
  Tensor bad = varies(Tensor(x));
  const std::string differ = errorOf([&] { (void)bad.array(); });
  EXPECT_NE(differ.find("is whole over mesh axis 'model' by its spec {\"data\"}, but replicas 0 and 1"), std::string::npos)
      << differ;
}

// ShardMapOptions::sumGradients: value_and_grad's gradients come summed over the axes their
// primals do not vary over, the bits of the hand-written sums (TensorParallelMlpBody's psums, and
// sumOverCopies for the transformer block's Tree); without it the same code gives each replica's
// own gradient, which the output check refuses.
TEST(MeshTest, SumGradientsSumsEachGradientOverItsCopiesAsWrittenByHand) {
  const Mesh mesh({{"data", 2}, {"model", 2}});
  const double lr = 0.1;
  auto body = [lr](const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2, const Tensor& x, const Tensor& y) {
    Tree p;
    p.set("w1", w1), p.set("b1", b1), p.set("w2", w2), p.set("b2", b2);
    const double replicas = double(axisSize("data") * axisSize("model"));
    auto [share, g] = value_and_grad([&](const Tree& q) {
      Tensor e = psum(matmul(relu(matmul(x, q.at("w1")) + q.at("b1")), q.at("w2")), "model") + q.at("b2") - y;
      return mean(e * e, {0, 1}) / replicas;
    })(p);
    Tree next;
    for (const auto& [name, t] : p) next.set(name, t - g.at(name) * lr);
    return std::tuple{next.at("w1"), next.at("b1"), next.at("w2"), next.at("b2"), psum(psum(share, "data"), "model")};
  };
  auto options = [](bool sum) {
    return ShardMapOptions{.inSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {"data"}, {"data"}},
                           .outSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {}},
                           .pmap = {.axisName = "mesh", .devices = "cpu:4"},
                           .sumGradients = sum};
  };
  auto automatic = shardMap(body, mesh, options(true));
  auto byHand = models::tensorParallelMlp(mesh, lr, {.axisName = "mesh", .devices = "cpu:4"});
  Array x = randomArray(DType::f32, {8, 6}, 5), y = randomArray(DType::f32, {8, 4}, 6);
  Tree init = models::mlpInit(6, 8, 4, DType::f32, 1);
  std::vector<Tensor> a{init.at("w1"), init.at("b1"), init.at("w2"), init.at("b2")}, b = a;
  for (int step = 0; step < 2; ++step) {
    auto [w1, b1, w2, b2, loss] = automatic(a[0], a[1], a[2], a[3], Tensor(x), Tensor(y));
    auto [v1, c1, v2, c2, handLoss] = byHand(b[0], b[1], b[2], b[3], Tensor(x), Tensor(y));
    a = {w1, b1, w2, b2}, b = {v1, c1, v2, c2};
    EXPECT_EQ(bytesOf(loss), bytesOf(handLoss));
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(bytesOf(a[i]), bytesOf(b[i])) << "step " << step << " parameter " << i;
  }
  // The transformer block's Tree, split leaf by leaf (transformerSpec): the gradients bit-equal to
  // sumOverCopies(g, spec)'s.
  const int64_t vocab = 11;
  Tree params = spmd::testing::transformerParams(vocab, 8, 32, 40);
  Array ids = Array::of<int32_t>({4, 5}, std::vector<int32_t>{1, 4, 4, 9, 0, 10, 3, 3, 7, 2, 5, 5, 1, 8, 6, 2, 9, 0, 4, 3});
  Array next = Array::of<int32_t>({4, 5}, std::vector<int32_t>{4, 4, 9, 0, 6, 3, 3, 7, 2, 5, 5, 1, 8, 6, 2, 9, 0, 4, 3, 7});
  const Spec spec = spmd::testing::transformerSpec("model");
  auto gradients = [&](bool automatic) {
    return shardMap(
        [&, automatic](const Tree& p, const Tensor& tokens, const Tensor& targets) {
          auto [share, g] = value_and_grad([&](const Tree& q) {
            Tensor logits = spmd::testing::transformerLogits(q, tokens, 2, false, "model");
            return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), reshape(targets, {-1})), {0}) / 4.0;
          })(p);
          return std::tuple{psum(share, "mesh"), automatic ? g : sumOverCopies(g, spec)};
        },
        mesh,
        {.inSpecs = {spec, {"data"}, {"data"}}, .outSpecs = {{}, spec}, .pmap = {.axisName = "mesh", .devices = "cpu:4"},
         .sumGradients = automatic});
  };
  auto [autoLoss, autoGrads] = gradients(true)(params, Tensor(ids), Tensor(next));
  auto [handLoss, handGrads] = gradients(false)(params, Tensor(ids), Tensor(next));
  EXPECT_EQ(bytesOf(autoLoss), bytesOf(handLoss));
  for (const auto& [name, t] : handGrads) EXPECT_EQ(bytesOf(autoGrads.at(name)), bytesOf(t)) << name;
  // Off, each replica's own gradient: w1's differs between the "data" replicas holding it.
  const std::string unsummed = errorOf([&] { shardMap(body, mesh, options(false))(a[0], a[1], a[2], a[3], Tensor(x), Tensor(y)); });
  EXPECT_NE(unsummed.find("varies over mesh axis 'data'"), std::string::npos) << unsummed;
}

Tree inDType(const Tree& tree, DType dtype) {
  Tree out;
  for (const auto& [name, t] : tree) {
    Array a = Array::zeros(dtype, t.shape());
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double v = spmd::testing::valueAt(t.array(), i);
      if (dtype == DType::f64) a.values<double>()[i] = v;
      else a.values<float>()[i] = float(v);
    }
    out.set(name, Tensor(a));
  }
  return out;
}

// TorchReferenceTest's transformer block with its heads and MLP hidden units split over "model"
// (q, k, v, fc1 by rows, proj and fc2 by columns: transformerSpec) and its batch over "data" on a
// {data: 2, model: 2} mesh: the loss and every gradient (each summed over the replicas holding a
// copy of its parameter, sumOverCopies) match the unsharded block on one device over 3 SGD steps:
// f64 within 1e-12 and f32 within 1e-5 of the largest gradient.
void expectTensorParallelTransformer(DType dtype, double tolerance) {
  SCOPED_TRACE(dtypeName(dtype));
  const int64_t vocab = 11, dim = 8, hidden = 32, heads = 2;
  Tree params = inDType(spmd::testing::transformerParams(vocab, dim, hidden, 40), dtype);
  Array ids = Array::of<int32_t>({4, 5}, std::vector<int32_t>{1, 4, 4, 9, 0, 10, 3, 3, 7, 2, 5, 5, 1, 8, 6, 2, 9, 0, 4, 3});
  Array targets = Array::of<int32_t>({4, 5}, std::vector<int32_t>{4, 4, 9, 0, 6, 3, 3, 7, 2, 5, 5, 1, 8, 6, 2, 9, 0, 4, 3, 7});
  auto lossOf = [&](const Tree& p, const Tensor& tokens, const Tensor& next, const std::string& modelAxis) {
    Tensor logits = spmd::testing::transformerLogits(p, tokens, heads, false, modelAxis);
    return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), reshape(next, {-1})), {0});
  };
  auto whole = jit([&](const Tree& p, const Tensor& tokens, const Tensor& next) {
    return value_and_grad([&](const Tree& q) { return lossOf(q, tokens, next, ""); })(p);
  });
  const Spec spec = spmd::testing::transformerSpec("model");
  auto sharded = shardMap(
      [&](const Tree& p, const Tensor& tokens, const Tensor& next) {
        const double replicas = double(axisSize("data") * axisSize("model"));
        auto [share, g] = value_and_grad([&](const Tree& q) { return lossOf(q, tokens, next, "model") / replicas; })(p);
        return std::tuple{psum(share, "mesh"), sumOverCopies(g, spec)};
      },
      Mesh({{"data", 2}, {"model", 2}}),
      {.inSpecs = {spec, {"data"}, {"data"}}, .outSpecs = {{}, spec}, .pmap = {.axisName = "mesh", .devices = "cpu:4"}});
  // Each side takes SGD steps of rate 0.1 on the host from its own gradients.
  auto sgd = [&](const Tree& p, const Tree& g) {
    Tree out;
    for (const auto& [name, t] : p) {
      Array a = Array::zeros(dtype, t.shape());
      for (int64_t i = 0; i < a.numel(); ++i) {
        const double v = spmd::testing::valueAt(t.array(), i) - 0.1 * spmd::testing::valueAt(g.at(name).array(), i);
        if (dtype == DType::f64) a.values<double>()[i] = v;
        else a.values<float>()[i] = float(v);
      }
      out.set(name, Tensor(a));
    }
    return out;
  };
  Tree wholeParams = params, tpParams = params;
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto [loss, grads] = whole(wholeParams, ids, targets);
    auto [tpLoss, tpGrads] = sharded(tpParams, Tensor(ids), Tensor(targets));
    const double l = spmd::testing::valueAt(loss.array(), 0);
    EXPECT_NEAR(spmd::testing::valueAt(tpLoss.array(), 0), l, tolerance * std::abs(l));
    double largest = 0;
    for (const auto& [name, g] : grads)
      for (int64_t i = 0; i < g.numel(); ++i) largest = std::max(largest, std::abs(spmd::testing::valueAt(g.array(), i)));
    ASSERT_EQ(tpGrads.size(), grads.size());
    for (const auto& [name, g] : grads) {
      ASSERT_EQ(tpGrads.at(name).shape(), g.shape()) << name;
      for (int64_t i = 0; i < g.numel(); ++i)
        EXPECT_NEAR(spmd::testing::valueAt(tpGrads.at(name).array(), i), spmd::testing::valueAt(g.array(), i),
                    tolerance * largest)
            << name << "[" << i << "]";
    }
    wholeParams = sgd(wholeParams, grads), tpParams = sgd(tpParams, tpGrads);
  }
}

TEST(MeshTest, TensorParallelTransformerBlockMatchesTheUnshardedBlock) {
  expectTensorParallelTransformer(DType::f64, 1e-12);
  expectTensorParallelTransformer(DType::f32, 1e-5);
}

// The per-axis replication analysis (passes/MeshVariation.h) while tracing: an output that
// varies over an axis its spec leaves whole is refused at trace time, naming the output, the axis
// and the user's line; reducing over the axis, or a spec splitting over it, is accepted; a
// whole parameter's gradient varies only over the axes its derivative is built from.
TEST(MeshTest, PerAxisVariationIsCheckedWhileTracing) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  const PmapOptions cpu4{.axisName = "mesh", .devices = "cpu:4"};
  Array x = randomArray(DType::f32, {4, 2}, 2);
  auto varies = shardMap([](const Tensor& v) { return v + cast(axisIndex("model"), DType::f32); }, mesh,
                         {.inSpecs = {{"data"}}, .outSpecs = {{"data"}}, .pmap = cpu4});
  const std::string refused = errorOf([&] { varies(Tensor(x)); });
  EXPECT_NE(refused.find("output 0 f32[2, 2] (computed at tests/unit/MeshTest.cpp:"), std::string::npos) << refused;
  EXPECT_NE(refused.find("varies over mesh axis 'model'"), std::string::npos) << refused;
  EXPECT_NE(refused.find("its spec {\"data\"} leaves it whole there"), std::string::npos) << refused;
  // Reduced over "model", or split over it: accepted, and the values are the host's.
  auto reduced = shardMap([](const Tensor& v) { return psum(v + cast(axisIndex("model"), DType::f32), "model"); }, mesh,
                          {.inSpecs = {{"data"}}, .outSpecs = {{"data"}}, .pmap = cpu4});
  Array r = reduced(Tensor(x)).array();
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(r.values<float>()[i], 2 * x.values<float>()[i] + 1) << i;
  auto split = shardMap([](const Tensor& v) { return v + cast(axisIndex("model"), DType::f32); }, mesh,
                        {.inSpecs = {{}}, .outSpecs = {{"model"}}, .pmap = cpu4});
  Array s = split(Tensor(x)).array();
  ASSERT_EQ(s.shape, (Shape{8, 2}));
  EXPECT_EQ(s.values<float>()[9], x.values<float>()[1] + 1);
  // w (whole) meets only x (split over "data"): its gradient, summed over "data", is whole; a
  // (split over "model") meets a model-varying value: its gradient summed over "data" too stays
  // split over "model". Returning w's gradient without the sum over "data" is refused.
  auto grads = [&](bool sumData) {
    return shardMap(
        [sumData](const Tensor& w, const Tensor& a, const Tensor& v) {
          Tree params;
          params.set("w", w), params.set("a", a);
          auto [loss, g] = value_and_grad([&](const Tree& p) {
            return sum(v * p.at("w"), {0, 1}) + psum(sum(p.at("a") * p.at("a"), {0}), "model");
          })(params);
          return std::tuple{sumData ? psum(g.at("w"), "data") : g.at("w"), psum(g.at("a"), "data")};
        },
        mesh, {.inSpecs = {{}, {"model"}, {"data"}}, .outSpecs = {{}, {"model"}}, .pmap = cpu4});
  };
  Array w = randomArray(DType::f32, {2}, 3), a = randomArray(DType::f32, {4}, 4);
  auto [gw, ga] = grads(true)(Tensor(w), Tensor(a), Tensor(x));
  for (int64_t j = 0; j < 2; ++j)  // d/dw of sum over all rows of v * w: the column sums of x
    EXPECT_NEAR(gw.array().values<float>()[j], x.values<float>()[j] + x.values<float>()[2 + j] + x.values<float>()[4 + j] +
                                                   x.values<float>()[6 + j], 1e-5);
  // a's part enters the loss of both replicas of its "model" group through the psum, and the
  // gradient is that of all replicas' losses summed (psum's transpose is psum): 2 x 2a per data
  // replica, summed over the 2 of them.
  for (int64_t i = 0; i < 4; ++i) EXPECT_NEAR(ga.array().values<float>()[i], 8 * a.values<float>()[i], 1e-5);
  const std::string unsummed = errorOf([&] { grads(false)(Tensor(w), Tensor(a), Tensor(x)); });
  EXPECT_NE(unsummed.find("output 0 f32[2]"), std::string::npos) << unsummed;
  EXPECT_NE(unsummed.find("varies over mesh axis 'data'"), std::string::npos) << unsummed;
  // Leaves reduced together keep each its own variation: b (split over "data") summed over it is
  // whole; c (split over both) summed over "data" still varies over "model".
  auto both = shardMap(
      [](const Tensor& b, const Tensor& c) {
        const std::vector<Tensor> sums = psum(std::vector<Tensor>{b, c}, "data");
        return std::tuple{sums[0], sums[1]};
      },
      mesh, {.inSpecs = {{"data"}, {"data", "model"}}, .outSpecs = {{}, {"", "model"}}, .pmap = cpu4});
  Array c = randomArray(DType::f32, {4, 4}, 5);
  auto [sb, sc] = both(Tensor(x), Tensor(c));
  EXPECT_EQ(sb.array().values<float>()[1], x.values<float>()[1] + x.values<float>()[2 * 2 + 1]);
  EXPECT_EQ(sc.array().values<float>()[3], c.values<float>()[3] + c.values<float>()[2 * 4 + 3]);
}

// A pmapped function called inside a shardMap body maps over one of the mesh's axes (jax's pmap
// inside a traced function; nested pmaps over two axes): each "cols" replica takes its row of
// the stacked argument (over any dimension, per leaf of a Tree), a replicated argument whole;
// results come back stacked over "cols" (at any dimension) or, reduced, replicated. Values and
// gradients against the host on a 2x3 mesh; what cannot work is refused naming the pmap's line.
TEST(MeshTest, PmapInsideATracedFunctionMapsOverAMeshAxis) {
  Mesh mesh({{"rows", 2}, {"cols", 3}});
  const PmapOptions cpu6{.axisName = "mesh", .devices = "cpu:6"};
  // g on one "cols" replica: its row times (its coordinate + 1) times s, plus the rows' sum.
  auto inner = pmap(
      [](const Tensor& row, const Tensor& s) {
        return std::tuple{row * (cast(axisIndex("cols"), DType::f32) + 1) * s + psum(row, "cols"), pmean(sum(row, {0}), "cols")};
      },
      {.axisName = "cols", .inAxes = {0, spmd::replicated}, .outAxes = {0, spmd::replicated}});
  const std::vector<float> half{0.5f};
  Array x = randomArray(DType::f32, {2, 3, 4}, 5), s = Array::of<float>({}, half);
  auto outer = shardMap(
      [&](const Tensor& v, const Tensor& scale) {
        auto [y, mean] = inner(reshape(v, {3, 4}), scale);
        auto [loss, g] = value_and_grad([&](const Tensor& w) { return sum(std::get<0>(inner(w, scale)), {0, 1}); })(
            reshape(v, {3, 4}));
        return std::tuple{reshape(y, {1, 3, 4}), reshape(mean, {1}), reshape(psum(g, "cols"), {1, 3, 4})};
      },
      mesh, {.inSpecs = {{"rows"}, {}}, .outSpecs = {{"rows"}, {"rows"}, {"rows"}}, .pmap = cpu6});
  auto [y, mean, grad] = outer(Tensor(x), Tensor(s));
  const float* xv = x.values<float>().data();
  for (int64_t r = 0; r < 2; ++r) {
    double total = 0;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t i = (r * 3 + c) * 4 + k;
        float column = 0;
        for (int64_t c2 = 0; c2 < 3; ++c2) column += xv[(r * 3 + c2) * 4 + k];
        EXPECT_NEAR(y.array().values<float>()[i], xv[i] * float(c + 1) * 0.5f + column, 1e-5) << i;
        // d/dx of every "cols" replica's loss (the same sum of the gathered rows) summed: 3 x
        // ((c + 1) s + 3), the psum's 3 copies of each row included.
        EXPECT_NEAR(grad.array().values<float>()[i], 3 * (float(c + 1) * 0.5f + 3), 1e-5) << i;
        total += xv[i];
      }
    EXPECT_NEAR(mean.array().values<float>()[r], total / 3, 1e-5) << r;
  }
  // in_axes / out_axes on another dimension, and per leaf of a Tree: v [4, 3] mapped over its
  // dimension 1 and stacked back there; a Tree whose "a" is stacked and "b" whole.
  auto columns = pmap([](const Tensor& column) { return column * (cast(axisIndex("cols"), DType::f32) + 1); },
                      {.axisName = "cols", .inAxes = {1}, .outAxes = {1}});
  auto weighted = pmap([](const Tree& t) { return sum(t.at("a") * t.at("b"), {0}); },
                       {.axisName = "cols", .inAxes = {perLeaf({{"b", spmd::replicated}}, 0)}, .outAxes = {-1}});
  Array v = randomArray(DType::f32, {2, 4, 3}, 6), b = randomArray(DType::f32, {4}, 7);
  auto other = shardMap(
      [&](const Tensor& part, const Tensor& bias) {
        Tree t;
        t.set("a", transpose(reshape(part, {4, 3}), {1, 0})), t.set("b", bias);
        return std::tuple{reshape(columns(reshape(part, {4, 3})), {1, 4, 3}), reshape(weighted(t), {1, 3})};
      },
      mesh, {.inSpecs = {{"rows"}, {}}, .outSpecs = {{"rows"}, {"rows"}}, .pmap = cpu6});
  auto [scaled, dots] = other(Tensor(v), Tensor(b));
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c) {
      double dot = 0;
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t i = (r * 4 + k) * 3 + c;
        EXPECT_EQ(scaled.array().values<float>()[i], v.values<float>()[i] * float(c + 1)) << i;
        dot += double(v.values<float>()[i]) * b.values<float>()[k];
      }
      EXPECT_NEAR(dots.array().values<float>()[r * 3 + c], dot, 1e-5) << r << " " << c;
    }
  // Refused: no mesh around it, a leading dimension that is not the axis' size, a result
  // returned replicated that differs between the replicas, an option of the enclosing function.
  auto plain = pmap([&](const Tensor& v) { return std::get<0>(inner(v, v)); }, {.devices = "cpu:1"});
  const std::string noMesh = errorOf([&] { plain(Tensor(randomArray(DType::f32, {1, 3}, 1))); });
  EXPECT_NE(noMesh.find("spmd::pmap over axis 'cols' (made at tests/unit/MeshTest.cpp:"), std::string::npos) << noMesh;
  EXPECT_NE(noMesh.find("which is not traced over a mesh"), std::string::npos) << noMesh;
  auto call = [&](auto f, const Array& a) {
    return errorOf([&] {
      shardMap(f, mesh, {.inSpecs = {{"rows"}}, .outSpecs = {{"rows"}}, .pmap = cpu6})(Tensor(a));
    });
  };
  const std::string wrongSize = call([&](const Tensor& v) { return std::get<0>(inner(v, sum(v, {0, 1}))); },
                                     randomArray(DType::f32, {4, 3}, 2));
  EXPECT_NE(wrongSize.find("argument 0 f32[2, 3] is mapped over axis 'cols' of size 3"), std::string::npos) << wrongSize;
  EXPECT_NE(wrongSize.find("its mapped dimension must be 3"), std::string::npos) << wrongSize;
  auto unreduced = pmap([](const Tensor& row) { return row; }, {.axisName = "cols", .outAxes = {spmd::replicated}});
  const std::string varies = call([&](const Tensor& v) { return reshape(unreduced(reshape(v, {3})), {1}); },
                                  randomArray(DType::f32, {2, 3}, 3));
  EXPECT_NE(varies.find("is returned spmd::replicated, but it varies over axis 'cols'"), std::string::npos) << varies;
  auto placed = pmap([](const Tensor& row) { return row; }, {.axisName = "cols", .devices = "cpu:3"});
  const std::string devices = call([&](const Tensor& v) { return reshape(placed(reshape(v, {3})), {1, 3}); },
                                   randomArray(DType::f32, {2, 3}, 4));
  EXPECT_NE(devices.find("its option devices (it runs on the enclosing mesh's)"), std::string::npos) << devices;
}

TEST(MeshTest, BadSpecsAndResultsAreClearErrors) {
  Mesh mesh({{"data", 2}, {"model", 2}});
  auto id = [](const Tensor& x) { return x; };
  EXPECT_NE(errorOf([&] { shardMap(id, mesh, {.inSpecs = {{"rows"}}, .outSpecs = {{}}}); })
                .find("inSpecs[0] {\"rows\"} names axis 'rows', which the mesh does not have"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { shardMap(id, mesh, {.inSpecs = {{"data", "data"}}, .outSpecs = {{}}}); })
                .find("splits two dimensions over axis 'data'"),
            std::string::npos);
  auto f = shardMap(id, mesh, {.inSpecs = {{"data"}}, .outSpecs = {{"data"}}, .pmap = {.axisName = "mesh", .devices = "cpu:4"}});
  EXPECT_NE(errorOf([&] { f(Tensor(randomArray(DType::f32, {3, 2}, 1))); })
                .find("dimension 0 (3) does not split into 2 equal parts over axis 'data'"),
            std::string::npos);
  // Split over "data" only: replicas along "model" return the same part, so putting it together
  // from "model" coordinate 0 is right; a value that differs along "model" is refused.
  Array x = randomArray(DType::f32, {4, 2}, 2);
  EXPECT_EQ(f(Tensor(x)).array().values<float>()[7], x.values<float>()[7]);
  // (With the static check off: it is the host's comparison of the bits that refuses it.)
  auto varies = shardMap([](const Tensor& v) { return v + cast(axisIndex("model"), DType::f32); }, mesh,
                         {.inSpecs = {{"data"}}, .outSpecs = {{"data"}}, .pmap = {.axisName = "mesh", .devices = "cpu:4"},
                          .checkVaries = false});
  const std::string differ = errorOf([&] { varies(Tensor(x)); });
  EXPECT_NE(differ.find("is whole over mesh axis 'model' by its spec {\"data\"}, but replicas 0 and 1"), std::string::npos)
      << differ;
  auto wrongSize = shardMap(id, mesh, {.inSpecs = {{}}, .outSpecs = {{}}, .pmap = {.axisName = "mesh", .devices = "cpu:2"}});
  EXPECT_NE(errorOf([&] { wrongSize(Tensor(x)); }).find("mesh {data: 2, model: 2} has 4 replicas but the job has 2 devices"),
            std::string::npos);
  auto badAxis = shardMap([](const Tensor& v) { return psum(v, "rows"); }, mesh,
                          {.inSpecs = {{}}, .outSpecs = {{}}, .pmap = {.axisName = "mesh", .devices = "cpu:4"}});
  const std::string unbound = errorOf([&] { badAxis(Tensor(x)); });
  EXPECT_NE(unbound.find("MeshTest.cpp:"), std::string::npos) << unbound;
  EXPECT_NE(unbound.find("binds the axes 'data', 'model', of mesh {data: 2, model: 2} and 'mesh' for the whole mesh"),
            std::string::npos)
      << unbound;
  auto a2a = shardMap([](const Tensor& v) { return allToAll(v, "model", 1, 1); }, mesh,
                      {.inSpecs = {{}}, .outSpecs = {{"model"}}, .pmap = {.axisName = "mesh", .devices = "cpu:4"}});
  const std::string chunks = errorOf([&] { a2a(Tensor(randomArray(DType::f32, {4, 3}, 2))); });
  EXPECT_NE(chunks.find("MeshTest.cpp:"), std::string::npos) << chunks;
  EXPECT_NE(chunks.find("spmd::allToAll over axis 'mesh' with groups: f32[4, 3] has 3 along split axis 1, which does not "
                        "split into 2 equal chunks"),
            std::string::npos)
      << chunks;
}

}  // namespace
}  // namespace spmd
