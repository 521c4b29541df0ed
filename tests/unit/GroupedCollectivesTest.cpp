// Collectives within groups of replicas (jax.lax's axis_index_groups; the reductions one all_reduce
// with replica groups, the rest composed in frontend/GroupedCollectives.cpp):
// psum, pmean, pmax, pmin, allGather and psumScatter over each replica's own group, against host arithmetic
// folded in the group's order over the same tree as an all_reduce of G replicas (the same bits),
// on several device counts and groups, cpu and the simulator; a group holding the whole axis is
// the ungrouped collective bit for bit; the gradient flows back within the group; bad groups are
// errors at the caller's line. Across processes (runtime/mpi/GroupExchange, moved here in memory):
// each replica's sources are its group's operands, and only what other processes' members need
// crosses processes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/device/Driver.h"
#include "runtime/mpi/GroupExchange.h"
#include "runtime/program/Catalog.h"
#include "runtime/program/ProgramCheck.h"

namespace spmd {
namespace {

using spmd::testing::errorOf;
using spmd::testing::randomArray;

template <typename T>
std::vector<T> values(const Tensor& t) {
  auto v = t.array().values<T>();
  return {v.begin(), v.end()};
}

// The fold tree of runtime/device/Fold.h over `leaves` (node (h, i): left op right, or left alone).
template <typename T>
T fold(const std::vector<T>& leaves, int h, size_t i, const std::function<T(T, T)>& op) {
  if (h == 0) return leaves[i];
  T left = fold(leaves, h - 1, 2 * i, op);
  if (((2 * i + 1) << (h - 1)) >= leaves.size()) return left;
  return op(left, fold(leaves, h - 1, 2 * i + 1, op));
}

template <typename T>
T foldAll(const std::vector<T>& leaves, const std::function<T(T, T)>& op) {
  int h = 0;
  while ((size_t(1) << h) < leaves.size()) ++h;
  return fold(leaves, h, 0, op);
}

template <typename T>
void expectGroupedCollectives(const std::string& devices, int64_t n, const AxisGroups& groups, DType dtype) {
  const int64_t width = 3, g = int64_t(groups[0].size());
  auto f = pmap(
      [&groups](const Tensor& x) {
        return std::tuple{psum(x, "batch", groups), pmean(x, "batch", groups), pmax(x, "batch", groups),
                          pmin(x, "batch", groups), allGather(x, "batch", groups)};
      },
      {.inAxes = {0}, .outAxes = {0, 0, 0, 0, 0}, .devices = devices, .strict = true});
  Array x = randomArray(dtype, {n, width}, 17 + n, -2, 2);
  auto [sums, means, maxes, mins, gathered] = f(x);
  auto xv = x.values<T>();
  for (const auto& group : groups)
    for (int64_t r : group)
      for (int64_t i = 0; i < width; ++i) {
        std::vector<T> leaves;
        for (int64_t m : group) leaves.push_back(xv[size_t(m * width + i)]);
        const T sum = foldAll<T>(leaves, [](T a, T b) { return a + b; });
        const size_t at = size_t(r * width + i);
        const std::string where = devices + " replica " + std::to_string(r) + " element " + std::to_string(i);
        EXPECT_EQ(values<T>(sums)[at], sum) << where;
        EXPECT_EQ(values<T>(means)[at], T(sum / T(g))) << where;
        EXPECT_EQ(values<T>(maxes)[at], foldAll<T>(leaves, [](T a, T b) { return std::max(a, b); })) << where;
        EXPECT_EQ(values<T>(mins)[at], foldAll<T>(leaves, [](T a, T b) { return std::min(a, b); })) << where;
        for (int64_t k = 0; k < g; ++k)  // [n, g, width]: replica r's rows of its group, in order
          EXPECT_EQ(values<T>(gathered)[size_t((r * g + k) * width + i)], leaves[size_t(k)]) << where << " row " << k;
      }
}

TEST(GroupedCollectivesTest, EachReplicaReducesAndGathersOverItsOwnGroup) {
  expectGroupedCollectives<float>("cpu:4", 4, {{0, 1}, {2, 3}}, DType::f32);
  expectGroupedCollectives<float>("cpu:4", 4, {{3, 0}, {2, 1}}, DType::f32);  // any order, any members
  expectGroupedCollectives<double>("cpu:6", 6, {{0, 3, 5}, {1, 2, 4}}, DType::f64);
  expectGroupedCollectives<float>("cpu:6", 6, {{5, 4}, {0, 1}, {3, 2}}, DType::f32);
  expectGroupedCollectives<float>("sim:4", 4, {{0, 2}, {1, 3}}, DType::f32);
  // The device kernels' slices: 3 elements over groups of 2 (uneven), members out of order.
  expectGroupedCollectives<double>("sim:6", 6, {{5, 4}, {0, 1}, {3, 2}}, DType::f64);
}

// On a GPU (skipped without one; the GPU report runs it): four replicas of one GPU fold their
// groups' slices with the device kernels, meeting on the device, as sim:4 does.
TEST(GroupedCollectivesTest, OnAGpuEachReplicaReducesOverItsOwnGroup) {
  std::string why;
  if (runtime::availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU: " << why;
  expectGroupedCollectives<float>("cuda:0*4", 4, {{3, 0}, {2, 1}}, DType::f32);
  expectGroupedCollectives<double>("cuda:0*4", 4, {{0, 2}, {1, 3}}, DType::f64);
}

// A reduction within groups is one all_reduce with replica groups, each replica reading its
// group's operands alone: no all_gather of every replica's operand (N times its bytes) in the
// program, whose arena stays within a few copies of the operand; a group of the whole axis in
// order is the plain all_reduce.
TEST(GroupedCollectivesTest, AReductionWithinGroupsIsOneAllReduceWithReplicaGroups) {
  const AxisGroups groups = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  const int64_t width = 1 << 16;
  auto f = pmap([&groups](const Tensor& x) { return psum(x, "batch", groups) * 2.0; },
                {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:8"});
  Array x = randomArray(DType::f32, {8, width}, 9);
  const Tensor y = f(x);
  EXPECT_EQ(values<float>(y)[1], 2 * (x.values<float>()[1] + x.values<float>()[4 * width + 1]));
  const std::string text = f.lastProgramText();
  EXPECT_NE(text.find("all_reduce"), std::string::npos) << text;
  EXPECT_NE(text.find("replica_groups"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
  EXPECT_LT(f.lastProgram().arenaBytes, size_t(4 * width * 4)) << text;
  // With accumulation a group's replicas may be micro-batches of one device, run one after another.
  auto accumulated = pmap([](const Tensor& v) { return psum(v, "batch", AxisGroups{{0, 2}, {1, 3}}); },
                          {.inAxes = {split}, .outAxes = {split}, .devices = "cpu:2", .accumulate = 2});
  const std::string error = errorOf([&] { accumulated(randomArray(DType::f32, {4, 3}, 2)); });
  EXPECT_NE(error.find("all_reduce within replica groups at"), std::string::npos) << error;
  EXPECT_NE(error.find("GroupedCollectivesTest.cpp:"), std::string::npos) << error;
  EXPECT_NE(error.find("with gradient accumulation is not supported"), std::string::npos) << error;
  auto exchanged = pmap([](const Tensor& v) { return allToAll(v, "batch", 0, 0, AxisGroups{{0, 2}, {1, 3}}); },
                        {.inAxes = {split}, .outAxes = {split}, .devices = "cpu:2", .accumulate = 2});
  const std::string exchange = errorOf([&] { exchanged(randomArray(DType::f32, {8, 2}, 3)); });
  EXPECT_NE(exchange.find("all_to_all within replica groups at"), std::string::npos) << exchange;
  EXPECT_NE(exchange.find("GroupedCollectivesTest.cpp:"), std::string::npos) << exchange;
  EXPECT_NE(exchange.find("psum, allGather, psumScatter or allToAll with AxisGroups"), std::string::npos) << exchange;
  // allGather and psumScatter within groups are likewise one op each, reading the group alone.
  auto moves = pmap(
      [&groups](const Tensor& v) {
        const Tensor rows = allGather(v, "batch", groups);  // [2, width]
        return psumScatter(rows * 3.0, "batch", groups);
      },
      {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:8"});
  const Tensor z = moves(x);
  // Replica 0 (position 0 of {0, 4}) gets row 0 of both members' [x_0, x_4] times 3, added.
  EXPECT_EQ(values<float>(z)[1], 3 * x.values<float>()[1] + 3 * x.values<float>()[1]);
  EXPECT_EQ(values<float>(z)[4 * width + 1], 3 * x.values<float>()[4 * width + 1] + 3 * x.values<float>()[4 * width + 1]);
  const std::string moved = moves.lastProgramText();
  EXPECT_NE(moved.find("all_gather"), std::string::npos) << moved;
  EXPECT_NE(moved.find("reduce_scatter"), std::string::npos) << moved;
  EXPECT_EQ(moved.find("embedding"), std::string::npos) << moved;  // no row selection: the groups' own ops
  EXPECT_LT(moves.lastProgram().arenaBytes, size_t(6 * width * 4)) << moved;
  auto whole = pmap([](const Tensor& v) { return psum(v, "batch", AxisGroups{{0, 1, 2, 3}}); },
                    {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:4"});
  whole(randomArray(DType::f32, {4, 3}, 2));
  EXPECT_EQ(whole.lastProgramText().find("replica_groups"), std::string::npos) << whole.lastProgramText();
}

// psumScatter within groups: x holds one row per group member; the replica at position p of its
// group gets the fold over its group of row p.
void expectGroupedScatter(const std::string& devices, int64_t n, const AxisGroups& groups) {
  const int64_t g = int64_t(groups[0].size()), width = 3;
  auto f = pmap([&groups](const Tensor& x) { return psumScatter(x, "batch", groups); },
                {.inAxes = {0}, .outAxes = {0}, .devices = devices, .strict = true});
  Array x = randomArray(DType::f32, {n, g, width}, 40 + n, -2, 2);
  Tensor y = f(x);
  auto xv = x.values<float>();
  for (const auto& group : groups)
    for (int64_t p = 0; p < g; ++p)
      for (int64_t i = 0; i < width; ++i) {
        std::vector<float> leaves;
        for (int64_t m : group) leaves.push_back(xv[size_t((m * g + p) * width + i)]);
        EXPECT_EQ(values<float>(y)[size_t(group[size_t(p)] * width + i)],
                  foldAll<float>(leaves, [](float a, float b) { return a + b; }))
            << devices << " replica " << group[size_t(p)] << " element " << i;
      }
}

TEST(GroupedCollectivesTest, PsumScatterGivesEachMemberItsRowOfTheGroupsSum) {
  expectGroupedScatter("cpu:4", 4, {{0, 2}, {3, 1}});
  expectGroupedScatter("cpu:6", 6, {{5, 0, 3}, {1, 2, 4}});
  expectGroupedScatter("sim:6", 6, {{5, 0, 3}, {1, 2, 4}});  // the device kernels' fold of a group's slices
  auto bad = pmap([](const Tensor& x) { return psumScatter(x, "batch", {{0, 1}, {2, 3}}); },
                  {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:4"});
  const std::string error = errorOf([&] { bad(randomArray(DType::f32, {4, 3, 2}, 1)); });
  EXPECT_NE(error.find("spmd::psumScatter over axis 'batch' with groups needs a leading axis of the group size 2 (one "
                       "row per member), got"),
            std::string::npos)
      << error;
}

// A group of every replica in axis order folds as the all_reduce does: the same bits.
TEST(GroupedCollectivesTest, OneGroupOfTheWholeAxisIsTheUngroupedCollective) {
  const AxisGroups all = {{0, 1, 2, 3, 4}};
  auto f = pmap(
      [&all](const Tensor& x) {
        return std::tuple{psum(x, "batch", all), psum(x, "batch"), pmean(x, "batch", all), pmean(x, "batch")};
      },
      {.inAxes = {0}, .outAxes = {0, replicated, 0, replicated}, .devices = "cpu:5"});
  Array x = randomArray(DType::f32, {5, 7}, 3, -1e3, 1e3);
  auto [groupSum, sum, groupMean, mean] = f(x);
  for (int r = 0; r < 5; ++r)
    for (int i = 0; i < 7; ++i) {
      EXPECT_EQ(values<float>(groupSum)[size_t(r * 7 + i)], values<float>(sum)[size_t(i)]) << r << " " << i;
      EXPECT_EQ(values<float>(groupMean)[size_t(r * 7 + i)], values<float>(mean)[size_t(i)]) << r << " " << i;
    }
}

// Each replica seeds its own loss sum(psum_group(x) * (r + 1)): replica s's gradient is the sum
// of r + 1 over the replicas r of its group, and nothing from the other groups.
TEST(GroupedCollectivesTest, TheGradientFlowsBackWithinTheGroup) {
  const AxisGroups groups = {{0, 3}, {1, 2}};
  auto f = pmap(
      [&groups](const Tensor& x) {
        auto [loss, g] = value_and_grad([&](const Tensor& v) {
          Tensor scale = cast(axisIndex("batch"), DType::f32) + 1.0;
          return sum(psum(v, "batch", groups) * scale, {0});
        })(x);
        return g;
      },
      {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:4"});
  Array x = randomArray(DType::f32, {4, 3}, 5);
  Tensor g = f(x);
  const float expected[] = {1 + 4, 2 + 3, 2 + 3, 1 + 4};
  for (int s = 0; s < 4; ++s)
    for (int i = 0; i < 3; ++i) EXPECT_EQ(values<float>(g)[size_t(s * 3 + i)], expected[s]) << s << " " << i;
}

// allToAll within groups is one all_to_all op with replica groups (no all_gather: each replica
// reads its group's blocks alone; a program claiming other groups for its shapes is refused), on
// `devices` (cpu:4 and sim:4 below, cuda:0*4 in the GPU report): one group of the whole axis in order has
// the bits of the ungrouped op (either pair of axes); pairs {{0, 2}, {3, 1}} against the host,
// f32 and i32; and its gradient is the grouped allToAll with the axes swapped (all_to_all's
// transpose), each replica seeding sum(allToAll(x) * c) with its own c.
void expectAllToAllWithinGroups(const char* devices) {
  SCOPED_TRACE(devices);
  const AxisGroups all = {{0, 1, 2, 3}}, pairs = {{0, 2}, {3, 1}};
  auto f = pmap(
      [&](const Tensor& x, const Tensor& c) {
        auto [loss, g] = value_and_grad([&](const Tensor& v) { return sum(allToAll(v, "batch", 0, 1, pairs) * c, {0, 1}); })(x);
        return std::tuple{allToAll(x, "batch", 0, 1, all), allToAll(x, "batch", 0, 1), allToAll(x, "batch", 1, 0, all),
                          allToAll(x, "batch", 1, 0), allToAll(x, "batch", 0, 1, pairs), g,
                          allToAll(c, "batch", 1, 0, pairs)};
      },
      {.inAxes = {0, 0}, .outAxes = {0, 0, 0, 0, 0, 0, 0}, .devices = devices});
  Array x = randomArray(DType::f32, {4, 4, 4}, 7), c = randomArray(DType::f32, {4, 2, 8}, 8);
  auto [group01, op01, group10, op10, byPairs, grad, swapped] = f(x, c);
  const std::string text = f.lastProgramText();
  EXPECT_NE(text.find("all_to_all"), std::string::npos) << text;
  EXPECT_NE(text.find("replica_groups"), std::string::npos) << text;
  EXPECT_EQ(text.find("all_gather"), std::string::npos) << text;
  // A program whose grouped all_to_all claims groups of 4 for its pairs' shapes is refused.
  runtime::Program edited = f.lastProgram();
  auto exchange = std::find_if(edited.steps.begin(), edited.steps.end(), [](const runtime::Step& step) {
    return step.op == "all_to_all" && step.attrs.count("group_size") && step.integer("group_size") == 2;
  });
  ASSERT_NE(exchange, edited.steps.end()) << text;
  exchange->attrs["group_size"] = int64_t(4), exchange->attrs["axis_size"] = int64_t(4);
  const std::string refused = errorOf([&] { runtime::checkProgram(edited); });
  EXPECT_NE(refused.find("'all_to_all' (tests/unit/GroupedCollectivesTest.cpp:"), std::string::npos) << refused;
  EXPECT_NE(refused.find(" over groups of 4 replicas"), std::string::npos) << refused;
  for (size_t i = 0; i < 64; ++i) {
    EXPECT_EQ(values<float>(group01)[i], values<float>(op01)[i]) << i;
    EXPECT_EQ(values<float>(group10)[i], values<float>(op10)[i]) << i;
    EXPECT_EQ(values<float>(grad)[i], values<float>(swapped)[i]) << i;
  }
  // Replica r at position p of its pair: [2 rows (chunk p of 4), 8 = 2 members x 4 columns].
  for (const auto& group : pairs)
    for (size_t p = 0; p < 2; ++p)
      for (int64_t row = 0; row < 2; ++row)
        for (size_t j = 0; j < 2; ++j)
          for (int64_t col = 0; col < 4; ++col)
            EXPECT_EQ(values<float>(byPairs)[size_t(group[p] * 16 + row * 8 + int64_t(j) * 4 + col)],
                      x.values<float>()[size_t(group[j] * 16 + (int64_t(p) * 2 + row) * 4 + col)])
                << group[p] << " " << row << " " << j << " " << col;
  // i32 along the columns into the rows: [4 ids] -> [2 members x 2 ids].
  auto ids = pmap([&](const Tensor& v) { return allToAll(v, "batch", 0, 0, pairs); },
                  {.inAxes = {0}, .outAxes = {0}, .devices = devices});
  std::vector<int32_t> idValues;
  for (int32_t i = 0; i < 16; ++i) idValues.push_back(i == 5 ? INT32_MIN : 1000 * (i / 4) + i % 4);
  const Tensor got = ids(Array::of<int32_t>({4, 4}, idValues));
  for (const auto& group : pairs)
    for (size_t p = 0; p < 2; ++p)
      for (size_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 2; ++k)
          EXPECT_EQ(values<int32_t>(got)[size_t(group[p] * 4 + int64_t(j) * 2 + k)],
                    idValues[size_t(group[j] * 4 + int64_t(p) * 2 + k)])
              << group[p] << " " << j << " " << k;
}

TEST(GroupedCollectivesTest, AllToAllWithinGroups) {
  expectAllToAllWithinGroups("cpu:4");
  expectAllToAllWithinGroups("sim:4");
}

// On a GPU (skipped without one; the GPU report runs it): four replicas of one GPU exchange their
// blocks through the device rendezvous, as sim:4 does.
TEST(GroupedCollectivesTest, OnAGpuAllToAllWithinGroups) {
  std::string why;
  if (runtime::availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU: " << why;
  expectAllToAllWithinGroups("cuda:0*4");
}

TEST(GroupedCollectivesTest, BadGroupsAreErrorsAtTheCallersLine) {
  Array x = randomArray(DType::f32, {4, 2}, 1);
  auto errorFor = [&](AxisGroups groups, DType dtype = DType::f32) {
    auto f = pmap([&](const Tensor& v) { return psum(cast(v, dtype), "batch", groups); },
                  {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:4"});
    return errorOf([&] { f(x); });
  };
  const std::pair<AxisGroups, std::string> cases[] = {
      {{{0, 1}, {2}}, "group 1 has 1 replicas but group 0 has 2; every group needs the same size"},
      {{{0, 1}, {1, 2}}, "replica 1 is in group 0 and in group 1; each replica belongs to one group"},
      {{{0, 1}}, "replica 2 is in no group; the groups must hold every replica of the axis"},
      {{{0, 1}, {2, 4}}, "group 1 names replica 4, but the axis has replicas 0..3"},
      {{}, "no groups given"},
  };
  for (const auto& [groups, message] : cases) {
    const std::string error = errorFor(groups);
    EXPECT_NE(error.find("GroupedCollectivesTest.cpp:"), std::string::npos) << error;
    EXPECT_NE(error.find("spmd::psum over axis 'batch' with groups: " + message), std::string::npos) << error;
  }
  EXPECT_NE(errorFor({{0, 1}, {2}}, DType::i32).find("group 1 has 1 replicas but group 0 has 2"), std::string::npos);
  // allToAll within groups of 2 of an axis of 3 elements: not G equal chunks, said at the call.
  auto uneven = pmap([](const Tensor& v) { return allToAll(reshape(v, {1, 2}), "batch", 1, 0, AxisGroups{{0, 1, 2, 3}}); },
                     {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:4"});
  const std::string split = errorOf([&] { uneven(x); });
  EXPECT_NE(split.find("GroupedCollectivesTest.cpp:"), std::string::npos) << split;
  EXPECT_NE(split.find("spmd::allToAll over axis 'batch' with groups: f32[1, 2] has 2 along split axis 1, which does "
                       "not split into 4 equal chunks, one per member of a group"),
            std::string::npos)
      << split;
  auto badAxis = pmap([](const Tensor& v) { return allToAll(v, "batch", 2, 0, AxisGroups{{0, 1}, {2, 3}}); },
                      {.inAxes = {0}, .outAxes = {0}, .devices = "cpu:4"});
  EXPECT_NE(errorOf([&] { badAxis(x); }).find("with groups: split and concat axes must be axes of f32[2]"), std::string::npos)
      << errorOf([&] { badAxis(x); });
}

// Integers keep i32 in every grouped collective but pmean (an f32: the group's wrapped sum over
// G), and sums wrap as the ungrouped i32 all_reduce's do: against host arithmetic modulo 2^32,
// with values near both ends of i32, and bit for bit against psum over the whole axis.
TEST(GroupedCollectivesTest, IntegersWrapAsTheUngroupedCollectiveDoes) {
  const AxisGroups groups = {{0, 3}, {1, 2}}, all = {{0, 1, 2, 3}};
  auto f = pmap(
      [&](const Tensor& x) {
        return std::tuple{psum(x, "batch", groups), pmean(x, "batch", groups), pmax(x, "batch", groups),
                          pmin(x, "batch", groups), allGather(x, "batch", groups), psumScatter(x, "batch", groups),
                          psum(x, "batch", all), psum(x, "batch")};
      },
      {.inAxes = {0}, .outAxes = {0, 0, 0, 0, 0, 0, 0, replicated}, .devices = "cpu:4"});
  const int64_t n = 4, rows = 2, cols = 3, d = rows * cols;
  std::vector<int32_t> xv(size_t(n * d));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i) {
      const int64_t k = r * d + i;
      xv[size_t(k)] = i % 3 == 0 ? int32_t(2147483000 + 97 * k) : i % 3 == 1 ? int32_t(-2147483000 - 89 * k) : int32_t(k * 7 - 20);
    }
  auto [sums, means, maxes, mins, gathered, scattered, whole, ungrouped] = f(Array::of<int32_t>({n, rows, cols}, xv));
  auto wrap = [](int64_t v) { return int32_t(uint32_t(uint64_t(v))); };
  for (const auto& group : groups)
    for (int64_t r : group) {
      for (int64_t i = 0; i < d; ++i) {
        int64_t sum = 0, mx = INT64_MIN, mn = INT64_MAX;
        for (int64_t m : group) sum += xv[size_t(m * d + i)], mx = std::max<int64_t>(mx, xv[size_t(m * d + i)]),
                                mn = std::min<int64_t>(mn, xv[size_t(m * d + i)]);
        EXPECT_EQ(values<int32_t>(sums)[size_t(r * d + i)], wrap(sum)) << r << " " << i;
        EXPECT_EQ(values<float>(means)[size_t(r * d + i)], float(wrap(sum)) / 2.f) << r << " " << i;
        EXPECT_EQ(values<int32_t>(maxes)[size_t(r * d + i)], int32_t(mx));
        EXPECT_EQ(values<int32_t>(mins)[size_t(r * d + i)], int32_t(mn));
        for (size_t k = 0; k < group.size(); ++k)
          EXPECT_EQ(values<int32_t>(gathered)[size_t((r * 2 + int64_t(k)) * d + i)], xv[size_t(group[k] * d + i)]);
      }
      const int64_t position = group[0] == r ? 0 : 1;
      for (int64_t j = 0; j < cols; ++j) {
        int64_t sum = 0;
        for (int64_t m : group) sum += xv[size_t(m * d + position * cols + j)];
        EXPECT_EQ(values<int32_t>(scattered)[size_t(r * cols + j)], wrap(sum)) << r << " " << j;
      }
    }
  EXPECT_EQ(sums.dtype(), DType::i32);
  EXPECT_EQ(means.dtype(), DType::f32);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < d; ++i)
      EXPECT_EQ(values<int32_t>(whole)[size_t(r * d + i)], values<int32_t>(ungrouped)[size_t(i)]) << r << " " << i;
}

}  // namespace
}  // namespace spmd

namespace spmd::runtime {
namespace {

// Groups of `groupSize` over n replicas: consecutive ({0, 1}, {2, 3}), strided ({0, n/G, ...}: a
// mesh's outer axis) or consecutive in reverse group order.
std::vector<std::vector<int64_t>> groupsOf(int n, int groupSize, const std::string& kind) {
  std::vector<std::vector<int64_t>> groups(size_t(n / groupSize));
  for (int r = 0; r < n; ++r) {
    if (kind == "strided") groups[size_t(r % (n / groupSize))].push_back(r);
    else groups[size_t(r / groupSize)].push_back(r);
  }
  if (kind == "reversed")
    for (auto& g : groups) std::reverse(g.begin(), g.end());
  return groups;
}

// Runs every process's plan, moves each outbox's pieces into the inboxes in memory, and checks
// that every replica's sources hold its members' operands (or rows) in group order. Returns the
// bytes that crossed processes.
size_t exchangeInMemory(GroupOp op, int processes, int local, const std::vector<std::vector<int64_t>>& groups) {
  const int n = processes * local, g = int(groups[0].size());
  const size_t operandBytes = size_t(8 * g);
  std::vector<std::vector<std::byte>> operands(size_t(processes), std::vector<std::byte>(operandBytes * size_t(local)));
  for (int r = 0; r < n; ++r)  // every byte names its replica and place
    for (size_t b = 0; b < operandBytes; ++b) operands[size_t(r / local)][size_t(r % local) * operandBytes + b] = std::byte(r * 37 + b);
  auto groupOf = [&](int64_t r) {
    for (const auto& group : groups)
      if (std::find(group.begin(), group.end(), r) != group.end()) return group;
    return std::vector<int64_t>{};
  };
  std::vector<GroupExchange> plans;
  std::vector<std::vector<std::byte>> outboxes;
  for (int p = 0; p < processes; ++p) {
    std::vector<std::vector<int64_t>> members;
    for (int l = 0; l < local; ++l) members.push_back(groupOf(p * local + l));
    plans.emplace_back(op, members, p, processes, operandBytes);
    outboxes.emplace_back(plans.back().routes().outboxBytes());
    plans.back().routes().pack(operands[size_t(p)].data(), outboxes.back().data());
  }
  size_t moved = 0;
  for (int p = 0; p < processes; ++p) {
    std::vector<std::byte> inbox(plans[size_t(p)].routes().inboxBytes());
    for (int q = 0; q < processes; ++q) {
      EXPECT_EQ(plans[size_t(q)].routes().sendBytes(p), plans[size_t(p)].routes().receiveBytes(q)) << "from " << q << " to " << p;
      if (q == p || plans[size_t(p)].routes().receiveBytes(q) != plans[size_t(q)].routes().sendBytes(p)) continue;
      std::memcpy(inbox.data() + plans[size_t(p)].routes().receiveOffset(q),
                  outboxes[size_t(q)].data() + plans[size_t(q)].routes().sendOffset(p), plans[size_t(p)].routes().receiveBytes(q));
      moved += plans[size_t(p)].routes().receiveBytes(q);
    }
    for (int l = 0; l < local; ++l) {
      const int64_t me = p * local + l;
      const std::vector<int64_t> group = groupOf(me);
      const size_t position = size_t(std::find(group.begin(), group.end(), me) - group.begin());
      const auto sources = plans[size_t(p)].sources(l, operands[size_t(p)].data(), inbox.data());
      EXPECT_EQ(sources.size(), group.size());
      const bool byRows = op == GroupOp::Scatter || op == GroupOp::Exchange;  // the row or block at l's position
      const size_t bytes = plans[size_t(p)].sourceBytes(), offset = byRows ? position * bytes : 0;
      for (size_t k = 0; k < group.size() && k < sources.size(); ++k) {
        const std::byte* want = operands[size_t(group[k] / local)].data() + size_t(group[k] % local) * operandBytes + offset;
        EXPECT_EQ(std::memcmp(sources[k], want, bytes), 0)
            << processes << " x " << local << ": replica " << me << "'s source " << k << " is not replica " << group[k] << "'s";
      }
    }
  }
  return moved;
}

TEST(GroupedCollectivesTest, AcrossProcessesEachReplicaGetsItsGroupsOperandsAndNoMore) {
  for (GroupOp op : {GroupOp::Reduce, GroupOp::Gather, GroupOp::Scatter, GroupOp::Exchange})
    for (auto [processes, local] : std::vector<std::pair<int, int>>{{1, 4}, {2, 2}, {4, 1}, {2, 3}, {3, 2}, {2, 4}, {4, 2}})
      for (int g : {1, 2, processes * local})
        for (const char* kind : {"consecutive", "strided", "reversed"})
          if ((processes * local) % g == 0) exchangeInMemory(op, processes, local, groupsOf(processes * local, g, kind));
  // A {data: 2, model: 4} mesh on 2 processes of 4 replicas. Over "model" (groups within a
  // process) nothing crosses; over "data" each operand goes once to the other process (4 x 8 x 2
  // bytes each way), where an all-gather would move them all; a reduce_scatter's only the row the
  // other member folds.
  EXPECT_EQ(exchangeInMemory(GroupOp::Reduce, 2, 4, groupsOf(8, 4, "consecutive")), 0u);
  EXPECT_EQ(exchangeInMemory(GroupOp::Reduce, 2, 4, groupsOf(8, 2, "strided")), 2u * 4 * 16);
  EXPECT_EQ(exchangeInMemory(GroupOp::Scatter, 2, 4, groupsOf(8, 2, "strided")), 2u * 4 * 8);
  // An all_to_all within the same groups: each replica's block for its remote member alone.
  EXPECT_EQ(exchangeInMemory(GroupOp::Exchange, 2, 4, groupsOf(8, 2, "strided")), 2u * 4 * 8);
  EXPECT_EQ(exchangeInMemory(GroupOp::Exchange, 2, 4, groupsOf(8, 4, "consecutive")), 0u);
  // Four processes of two, groups of four across all of them: each replica's operand goes to the
  // three processes of its other members.
  EXPECT_EQ(exchangeInMemory(GroupOp::Gather, 4, 2, groupsOf(8, 4, "strided")), 8u * 3 * 32);
  // Two members of each group on each of 2 processes: an operand both remote members read crosses
  // once; a reduce_scatter's two rows they fold cross once each.
  const std::vector<std::vector<int64_t>> twoByTwo{{0, 1, 4, 5}, {2, 3, 6, 7}};
  EXPECT_EQ(exchangeInMemory(GroupOp::Reduce, 2, 4, twoByTwo), 8u * 32);
  EXPECT_EQ(exchangeInMemory(GroupOp::Scatter, 2, 4, twoByTwo), 8u * 2 * 8);
  EXPECT_EQ(exchangeInMemory(GroupOp::Exchange, 2, 4, twoByTwo), 8u * 2 * 8);
}

// Moves every process's outbox into the others' inboxes in memory and returns, per process, the
// inbox and the bytes it received.
std::vector<std::vector<std::byte>> moveInMemory(const std::vector<Routes>& plans,
                                                 const std::vector<std::vector<std::byte>>& operands, size_t& moved) {
  const int processes = int(plans.size());
  std::vector<std::vector<std::byte>> outboxes, inboxes;
  for (int p = 0; p < processes; ++p) {
    outboxes.emplace_back(plans[size_t(p)].outboxBytes());
    plans[size_t(p)].pack(operands[size_t(p)].data(), outboxes.back().data());
  }
  moved = 0;
  for (int p = 0; p < processes; ++p) {
    inboxes.emplace_back(plans[size_t(p)].inboxBytes());
    for (int q = 0; q < processes; ++q) {
      EXPECT_EQ(plans[size_t(q)].sendBytes(p), plans[size_t(p)].receiveBytes(q)) << "from " << q << " to " << p;
      if (q == p || plans[size_t(q)].sendBytes(p) != plans[size_t(p)].receiveBytes(q)) continue;
      std::memcpy(inboxes.back().data() + plans[size_t(p)].receiveOffset(q),
                  outboxes[size_t(q)].data() + plans[size_t(q)].sendOffset(p), plans[size_t(p)].receiveBytes(q));
      moved += plans[size_t(p)].receiveBytes(q);
    }
  }
  return inboxes;
}

// A ppermute (a ring, and a pair list that leaves replicas out) and an all_to_all across processes:
// each replica finds its source's operand, or replica j's block for it, and only what crosses
// processes moves.
TEST(GroupedCollectivesTest, AcrossProcessesPpermuteAndAllToAllMoveOnlyWhatCrosses) {
  for (auto [processes, local] : std::vector<std::pair<int, int>>{{1, 4}, {2, 2}, {4, 1}, {2, 3}, {2, 4}}) {
    const int n = processes * local;
    const size_t bytes = size_t(8 * n);
    std::vector<std::vector<std::byte>> operands(size_t(processes), std::vector<std::byte>(bytes * size_t(local)));
    for (int r = 0; r < n; ++r)
      for (size_t b = 0; b < bytes; ++b) operands[size_t(r / local)][size_t(r % local) * bytes + b] = std::byte(r * 37 + b);
    auto operand = [&](int64_t r) { return operands[size_t(r / local)].data() + size_t(r % local) * bytes; };
    std::vector<int64_t> ring, some{0, n - 1, n - 1, 0};
    for (int r = 0; r < n; ++r) ring.insert(ring.end(), {r, (r + 1) % n});
    for (const std::vector<int64_t>& pairs : {ring, some}) {
      std::vector<Routes> plans;
      for (int p = 0; p < processes; ++p) plans.push_back(permuteRoutes(pairs, p, processes, local, bytes));
      size_t moved = 0;
      auto inboxes = moveInMemory(plans, operands, moved);
      size_t crossing = 0;
      for (size_t i = 0; i + 1 < pairs.size(); i += 2) crossing += pairs[i] / local != pairs[i + 1] / local ? bytes : 0;
      EXPECT_EQ(moved, crossing) << processes << " x " << local;
      for (int64_t me = 0; me < n; ++me) {
        const int p = int(me / local), l = int(me % local);
        const int64_t source = ppermuteSource(pairs, me);
        for (int64_t src = 0; src < n; ++src) {
          const std::byte* got = plans[size_t(p)].piece(l, src, operands[size_t(p)].data(), inboxes[size_t(p)].data());
          if (src != source) {
            EXPECT_EQ(got, nullptr) << "replica " << me << " reads replica " << src << ", not its source";
            continue;
          }
          ASSERT_NE(got, nullptr) << "replica " << me << " finds no piece of its source " << src;
          EXPECT_EQ(std::memcmp(got, operand(src), bytes), 0) << "replica " << me << "'s piece of its source " << src;
        }
      }
    }
    std::vector<Routes> plans;
    for (int p = 0; p < processes; ++p) plans.push_back(blockRoutes(p, processes, local, bytes));
    size_t moved = 0;
    auto inboxes = moveInMemory(plans, operands, moved);
    EXPECT_EQ(moved, size_t(n) * size_t(n - local) * (bytes / size_t(n)));  // each block to a replica elsewhere
    for (int64_t me = 0; me < n; ++me)
      for (int64_t src = 0; src < n; ++src) {
        const int p = int(me / local);
        const std::byte* got = plans[size_t(p)].piece(int(me % local), src, operands[size_t(p)].data(), inboxes[size_t(p)].data());
        ASSERT_NE(got, nullptr);
        EXPECT_EQ(std::memcmp(got, operand(src) + size_t(me) * 8, 8), 0) << "replica " << me << "'s block of " << src;
      }
  }
}

// checkProgram stops such groups first; the exchange still refuses them instead of reading astray.
TEST(GroupedCollectivesTest, AcrossProcessesGroupsThatCannotBeAreRefused) {
  auto refusal = [](GroupOp op, std::vector<std::vector<int64_t>> members, size_t bytes) {
    try {
      GroupExchange(op, std::move(members), 0, 2, bytes);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(refusal(GroupOp::Reduce, {{0, 2}, {0, 2}}, 16).find("replica 1 is not in its own replica group"), std::string::npos);
  EXPECT_NE(refusal(GroupOp::Reduce, {{0, 2}, {1}}, 16).find("replica 1's group holds 1 replicas where another's holds 2"),
            std::string::npos);
  EXPECT_NE(refusal(GroupOp::Reduce, {{0, 4}, {1, 3}}, 16).find("member 4 is outside the job's 4 replicas"), std::string::npos);
  EXPECT_NE(refusal(GroupOp::Scatter, {{0, 2}, {1, 3}}, 15).find("15 bytes does not split into 2 rows"), std::string::npos);
  EXPECT_EQ(refusal(GroupOp::Scatter, {{0, 2}, {1, 3}}, 16), "no error");
  EXPECT_NE(refusal(GroupOp::Exchange, {{0, 2}, {1, 3}}, 15).find("an all_to_all's operand of 15 bytes does not split"),
            std::string::npos);
}

}  // namespace
}  // namespace spmd::runtime
