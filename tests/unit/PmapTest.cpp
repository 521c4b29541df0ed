// spmd::pmap on emulated CPU devices: how arguments are mapped and outputs assembled, what each
// collective computes (against the same arithmetic on the host), gradients through
// collectives, recompiling, and every bad input with its exact error.
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/device/Variants.h"

namespace spmd {
namespace {

using spmd::testing::randomArray;

template <typename T>
std::vector<T> values(const Tensor& t) {
  auto v = t.array().values<T>();
  return {v.begin(), v.end()};
}

using spmd::testing::errorOf;

// An f64 or i32 result's values as doubles.
std::vector<double> asDoubles(const Tensor& t) {
  if (t.array().dtype == DType::f64) return values<double>(t);
  const auto v = values<int32_t>(t);
  return {v.begin(), v.end()};
}

TEST(PmapTest, StackedAndSplitInputsGiveEachReplicaItsChunk) {
  // Each replica returns its chunk times (1 + its index): mapped outputs come back in order.
  auto f = pmap([](const Tensor& x) { return mul(x, add(cast(axisIndex("batch"), DType::f32), 1.0)); },
                {.inAxes = {spmd::split}, .outAxes = {spmd::split}, .devices = "cpu:4"});
  Array x = randomArray(DType::f32, {8, 3}, 1);
  Tensor y = f(x);
  EXPECT_EQ(y.shape(), (Shape{8, 3}));
  auto xv = x.values<float>();
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(values<float>(y)[i], xv[i] * float(1 + i / 6)) << i;

  auto g = pmap([](const Tensor& x) { return psum(x, "batch"); },
                {.inAxes = {0}, .devices = "cpu:3"});
  Array stacked = randomArray(DType::f64, {3, 2, 2}, 2);
  Tensor sum = g(stacked);
  ASSERT_EQ(sum.shape(), (Shape{2, 2}));
  auto in = stacked.values<double>();
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(values<double>(sum)[i], (in[i] + in[4 + i]) + in[8 + i]);
}

TEST(PmapTest, CollectivesMatchHostArithmetic) {
  const int n = 4;
  auto f = pmap(
      [](const Tensor& x) {
        Tensor index = axisIndex("batch");
        return std::tuple{psum(x, "batch"), pmean(x, "batch"), pmax(x, "batch"), pmin(x, "batch"),
                          allGather(x, "batch"), psumScatter(allGather(x, "batch"), "batch"), index};
      },
      {.inAxes = {0}, .outAxes = {replicated, replicated, replicated, replicated, replicated, 0, 0},
       .devices = "cpu:4"});
  Array x = randomArray(DType::f64, {n, 5}, 3);
  auto [sum, mean, max, min, gathered, scattered, index] = f(x);
  auto v = x.values<double>();
  for (int i = 0; i < 5; ++i) {
    double s = 0, hi = -1e9, lo = 1e9;
    for (int r = 0; r < n; ++r) {
      s += v[r * 5 + i];
      hi = std::max(hi, v[r * 5 + i]);
      lo = std::min(lo, v[r * 5 + i]);
    }
    EXPECT_DOUBLE_EQ(values<double>(sum)[i], s);
    EXPECT_DOUBLE_EQ(values<double>(mean)[i], s / n);
    EXPECT_EQ(values<double>(max)[i], hi);
    EXPECT_EQ(values<double>(min)[i], lo);
    // psumScatter(allGather(x)) on replica r = sum over replicas of x_r = n * x_r.
    for (int r = 0; r < n; ++r) EXPECT_DOUBLE_EQ(values<double>(scattered)[r * 5 + i], n * v[r * 5 + i]);
  }
  EXPECT_EQ(values<double>(gathered), values<double>(Tensor(x)));
  EXPECT_EQ(values<int32_t>(index), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(PmapTest, GradientsThroughCollectivesFollowPmapSemantics) {
  // loss = sum(w * pmean(x)) is invariant. Its gradient for w is pmean(x) on every replica; for
  // the mapped x_r, pmap semantics (each replica seeds its own loss) give pmean(w) = w.
  auto f = pmap(
      [](const Tensor& w, const Tensor& x) {
        auto [loss, gw] = value_and_grad([&](const Tensor& wv) {
          return sum(mul(wv, pmean(x, "batch")), {0});
        })(w);
        auto [same, gx] = value_and_grad([&](const Tensor& xv) {
          return sum(mul(w, pmean(xv, "batch")), {0});
        })(x);
        return std::tuple{loss, gw, gx};
      },
      // strict: compiling fails if the compiler would insert any pmean (it must not here).
      {.inAxes = {replicated, 0}, .outAxes = {replicated, replicated, 0}, .devices = "cpu:2",
       .strict = true});
  Array w = randomArray(DType::f64, {3}, 4), x = randomArray(DType::f64, {2, 3}, 5);
  auto [loss, gw, gx] = f(w, x);
  auto wv = w.values<double>(), xv = x.values<double>();
  double expected = 0;
  for (int i = 0; i < 3; ++i) {
    double mean = (xv[i] + xv[3 + i]) / 2;
    expected += wv[i] * mean;
    EXPECT_DOUBLE_EQ(values<double>(gw)[i], mean);
    EXPECT_DOUBLE_EQ(values<double>(gx)[i], wv[i]);
    EXPECT_DOUBLE_EQ(values<double>(gx)[3 + i], wv[i]);
  }
  EXPECT_NEAR(values<double>(loss)[0], expected, 1e-15);
}

TEST(PmapTest, InsertedPmeanAveragesLossAndGradientOverReplicas) {
  // Per-replica loss sum(w * x_r): the compiler averages the loss and w's gradient.
  auto f = pmap(
      [](const Tensor& w, const Tensor& x) {
        return value_and_grad([&](const Tensor& wv) { return sum(mul(wv, x), {0}); })(w);
      },
      {.inAxes = {replicated, 0}, .devices = "cpu:3"});
  Array w = randomArray(DType::f64, {2}, 6), x = randomArray(DType::f64, {3, 2}, 7);
  auto [loss, grad] = f(w, x);
  auto wv = w.values<double>(), xv = x.values<double>();
  double expected = 0;
  for (int i = 0; i < 2; ++i) {
    double mean = (xv[i] + xv[2 + i] + xv[4 + i]) / 3;
    expected += wv[i] * mean;
    EXPECT_NEAR(values<double>(grad)[i], mean, 1e-15);
  }
  EXPECT_NEAR(values<double>(loss)[0], expected, 1e-15);
}

// The default threads per replica count micro-batches as replicas: cpu:1 with 4 micro-batches
// runs cpu:4's share (before, the whole process's threads: on a 2-core host 2 against 1, and
// oneDNN's f32 bits differ between thread counts), so every layout of one N agrees by default.
TEST(PmapTest, MicroBatchesCountAsReplicasInTheDefaultThreadShare) {
  auto f = [](const Tensor& x) { return pmean(x, "batch"); };
  auto threads = [&](const std::string& devices, int accumulate, std::string* why, int atOnce = 0) {
    return pmap(f, {.devices = devices, .accumulate = accumulate, .microBatchesAtOnce = atOnce}).threadsPerReplica(why);
  };
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  std::string why4, why1;
  const int four = threads("cpu:4", 1, &why4);
  EXPECT_EQ(threads("cpu:2", 2, nullptr), four);
  EXPECT_EQ(threads("cpu:1", 4, &why1), four) << why1;
  EXPECT_EQ(threads("cpu:1", 4, nullptr, 1), four);  // one at a time: the same share
  EXPECT_NE(why1.find("(1 x 4 micro-batches)"), std::string::npos) << why1;
  // With thread-invariant kernels the bits do not depend on the threads: the micro-batches that
  // run together share the device's threads, one at a time all of them (ThreadInvarianceTest
  // compares the bits).
  runtime::setThreadInvariantKernels(true);
  std::string oneWhy, twoWhy;
  const int whole = threads("cpu:1", 1, nullptr), one = threads("cpu:1", 4, &oneWhy, 1),
            two = threads("cpu:1", 4, &twoWhy);
  runtime::setThreadInvariantKernels(std::nullopt);
  omp_set_num_threads(before);
  EXPECT_EQ(whole, 2);
  EXPECT_EQ(one, whole) << oneWhy;
  EXPECT_NE(oneWhy.find("one at a time with the device's share: SPMD_THREAD_INVARIANT=1"), std::string::npos) << oneWhy;
  EXPECT_EQ(two, 1) << twoWhy;
  EXPECT_NE(twoWhy.find("(1 x 2 micro-batches at once: SPMD_THREAD_INVARIANT=1); 2 micro-batches of each replica run at once"),
            std::string::npos)
      << twoWhy;
}

// With accumulation the update after the micro-batches runs alone: where its kernels' bits do
// not depend on the threads (an elementwise update), it takes the device's whole share and the
// share's text says so; where they may (a matmul: oneDNN's own threading), the micro-batches'
// share, so its bits stay those of the replica count it stands for. Before the first call the
// share is the estimate; after, what the compiled step runs.
TEST(PmapTest, TheUpdateAfterTheMicroBatchesTakesTheDevicesShareWhereItsBitsAllow) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  Array w = randomArray(DType::f32, {4, 4}, 11), x = randomArray(DType::f32, {8, 4}, 12);
  auto gradient = [](const Tensor& wv, const Tensor& xv) {
    return grad([&](const Tensor& p) { return sum(mul(matmul(xv, p), matmul(xv, p)), {0, 1}); })(wv);
  };
  auto elementwise = [&](const Tensor& wv, const Tensor& xv) { return sub(wv, mul(gradient(wv, xv), 0.1)); };
  auto throughMatmul = [&](const Tensor& wv, const Tensor& xv) { return sub(wv, matmul(gradient(wv, xv), wv)); };
  const PmapOptions options{.inAxes = {replicated, split}, .devices = "cpu:1", .accumulate = 4};
  auto first = pmap(elementwise, options);
  std::string estimate, plain, withMatmul;
  EXPECT_EQ(first.threadsPerReplica(&estimate), 1);
  first(w, x);
  EXPECT_EQ(first.threadsPerReplica(&plain), 1);
  auto second = pmap(throughMatmul, options);
  second(w, x);
  EXPECT_EQ(second.threadsPerReplica(&withMatmul), 1);
  omp_set_num_threads(before);
  EXPECT_EQ(estimate.find("the update"), std::string::npos) << estimate;
  EXPECT_NE(plain.find("(1 x 4 micro-batches)"), std::string::npos) << plain;
  EXPECT_NE(plain.find("; the update after the micro-batches runs on 2 (its kernels' bits do not depend on the threads)"),
            std::string::npos)
      << plain;
  EXPECT_EQ(withMatmul.find("the update"), std::string::npos) << withMatmul;
}

// More replicas than the process's threads take turns on them (runtime/device/CoreTurns.h),
// which the thread share says; SPMD_REPLICA_TURNS=0 runs them all at once. Same bits either way.
TEST(PmapTest, ReplicasBeyondTheThreadsTakeTurnsAndSaySo) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  auto f = [](const Tensor& x) { return pmean(mul(x, x), "batch"); };
  Array x = spmd::testing::randomArray(DType::f32, {8, 5}, 3);
  auto run = [&](std::string* why) {
    auto step = pmap(f, {.devices = "cpu:8"});
    step.threadsPerReplica(why);
    return values<float>(step(x));
  };
  std::string turns, all;
  const std::vector<float> inTurns = run(&turns);
  setenv("SPMD_REPLICA_TURNS", "0", 1);
  const std::vector<float> atOnce = run(&all);
  unsetenv("SPMD_REPLICA_TURNS");
  omp_set_num_threads(before);
  EXPECT_NE(turns.find("; 2 of the 8 replicas run at once, taking turns on the 2 threads"), std::string::npos) << turns;
  EXPECT_EQ(all.find("turns"), std::string::npos) << all;
  EXPECT_EQ(inTurns, atOnce);
}

// Gradient accumulation: K devices x A micro-batches are the same bits as K * A devices, in
// f64 on values that cancel (so a different fold order shows), including what axisIndex gives
// each micro-batch (the virtual replica) and the mapped output assembled from the micro-batches.
TEST(PmapTest, AccumulationEqualsMoreReplicasBitForBit) {
  auto step = [](const Tensor& w, const Tensor& x) {
    Tensor index = add(cast(axisIndex("batch"), DType::f64), 1.0);
    auto [loss, grad] = value_and_grad([&](const Tensor& wv) { return mul(sum(mul(wv, x), {0, 1}), index); })(w);
    return std::tuple{loss, grad, mul(x, index)};
  };
  Array w = randomArray(DType::f64, {3}, 8), x = randomArray(DType::f64, {16, 3}, 9);
  for (int64_t i = 0; i < x.numel(); ++i) x.values<double>()[i] *= (i % 5 == 0 ? 1e12 : 1.0);
  // Called twice: the second call runs `atOnce` micro-batches together (the first, one at a time).
  auto run = [&](const std::string& devices, int accumulate, int atOnce) {
    auto f = pmap(step, {.inAxes = {replicated, split}, .outAxes = {replicated, replicated, split},
                         .devices = devices, .accumulate = accumulate, .microBatchesAtOnce = atOnce});
    f(w, x);
    auto [loss, grad, scaled] = f(w, x);
    return std::tuple{values<double>(loss), values<double>(grad), values<double>(scaled)};
  };
  auto reference = run("cpu:8", 1, 0);
  for (auto [devices, accumulate, atOnce] : {std::tuple{"cpu:4", 2, 1}, {"cpu:2", 4, 1}, {"cpu:1", 8, 1},
                                             {"cpu:2", 4, 2}, {"cpu:1", 8, 3}, {"cpu:1", 8, 8}})
    EXPECT_EQ(run(devices, accumulate, atOnce), reference)
        << devices << " x " << accumulate << " micro-batches, " << atOnce << " at once";
  // On the simulator (the GPU backend's kernels and device-side folds: the leaves added by the
  // device's own kernel, the all-reduce dividing a mean by every leaf), against sim:8.
  const auto simReference = run("sim:8", 1, 0);
  for (auto [devices, accumulate, atOnce] : {std::tuple{"sim:4", 2, 1}, {"sim:1", 8, 0}, {"sim:2", 4, 0}})
    EXPECT_EQ(run(devices, accumulate, atOnce), simReference)
        << devices << " x " << accumulate << " micro-batches, " << atOnce << " at once";
  // A device with its own stream runs its micro-batches one at a time: more at once is refused.
  EXPECT_NE(errorOf([&] { run("sim:2", 4, 2); }).find("microBatchesAtOnce is 2, but sim:2's devices run their "
                                                      "micro-batches on one stream, one at a time"),
            std::string::npos);
  // The values make the order matter: a left fold of the virtual replicas' gradients (what the
  // fold was before the tree) gives other bits than the tree for some element.
  auto xv = x.values<double>();
  int differ = 0;
  for (int j = 0; j < 3; ++j) {
    double left = 0;
    for (int v = 0; v < 8; ++v) {
      double g = (xv[(2 * v) * 3 + j] + xv[(2 * v + 1) * 3 + j]) * (v + 1);
      left = v == 0 ? g : left + g;
    }
    differ += left / 8 != std::get<1>(reference)[j];
  }
  EXPECT_GT(differ, 0);
}

// A value the same on every micro-batch (a replicated parameter, a norm of the reduced
// gradients) counts once per virtual replica in a sum or mean over the axis, as on the larger
// layout: a psum of a parameter in the forward pass (the micro part), a pmean of it beside the
// gradients' (combined into one all-reduce) while the update reads the parameter itself, and a
// psum, pmean and pmax of the reduced gradients after them (the apply part). Before, these gave
// 1 / A of the psums and an update from A times the parameter, silently.
TEST(PmapTest, AccumulationCountsAValueTheSameOnEveryMicroBatchOncePerVirtualReplica) {
  auto step = [](const Tensor& w, const Tensor& x) {
    Tensor total = psum(w, "batch");
    auto [loss, grad] = value_and_grad([&](const Tensor& wv) { return sum(mul(mul(wv, total), x), {0, 1}); })(w);
    Tensor g2 = mul(grad, grad);
    return std::tuple{loss, sub(w, mul(grad, 0.1)), total, pmean(w, "batch"), psum(g2, "batch"), pmean(g2, "batch"),
                      pmax(g2, "batch")};
  };
  Array w = randomArray(DType::f64, {3}, 8), x = randomArray(DType::f64, {16, 3}, 9);
  auto run = [&](const std::string& devices, int accumulate) {
    auto f = pmap(step, {.inAxes = {replicated, split}, .outAxes = std::vector<Axis>(7, replicated),
                         .devices = devices, .accumulate = accumulate});
    std::vector<std::vector<double>> out;
    std::apply([&](const auto&... value) { (out.push_back(values<double>(value)), ...); }, f(w, x));
    return out;
  };
  for (const char* backend : {"cpu", "sim"}) {
    const auto reference = run(std::string(backend) + ":4", 1);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(reference[2][size_t(i)], 4 * w.values<double>()[i]);  // 4 replicas' psum
    for (auto [devices, accumulate] : {std::pair{":2", 2}, {":1", 4}})
      EXPECT_EQ(run(backend + std::string(devices), accumulate), reference) << backend << devices << " x " << accumulate;
  }
  // Counting an i32 value once per micro-batch is refused, with where and what to do.
  auto count = pmap(
      [](const Tensor& w, const Tensor& x) { return std::tuple{pmean(x, "batch"), psum(cast(w, DType::i32), "batch")}; },
      {.inAxes = {replicated, split}, .devices = "cpu:2", .accumulate = 2});
  const std::string error = errorOf([&] { count(w, x); });
  EXPECT_NE(error.find("all_reduce (sum) at "), std::string::npos) << error;
  EXPECT_NE(error.find("reduces a value of dtype i32 that is the same on every micro-batch; with gradient accumulation it counts "
                       "once per micro-batch (multiplied by 2), which is done for f32 and f64 values only: cast it to f32 first"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("PmapTest.cpp:"), std::string::npos) << error;
}

// A pmax or pmin of values that differ between micro-batches (the worst loss of a step) folds
// the micro-batches with its own reduction, and an i32 psum of them (a count of correct
// predictions) adds them (on sim on the host: the device kernels take floats): K devices x A
// micro-batches give what K * A devices give, also where one value is both summed and maxed.
TEST(PmapTest, AccumulationFoldsEachAllReduceWithItsOwnReduction) {
  auto step = [](const Tensor& w, const Tensor& x) {
    auto [loss, grad] = value_and_grad([&](const Tensor& wv) { return sum(mul(mul(wv, x), x), {0, 1}); })(w);
    Tensor row = max(abs(x), {1});
    Tensor positive = cast(sum(greater(x, fill(x, 0.0)), {0, 1}), DType::i32);
    return std::tuple{pmean(loss, "batch"), pmean(grad, "batch"), pmax(loss, "batch"), pmin(loss, "batch"),
                      pmax(max(row, {0}), "batch"), pmin(mul(row, -1.0), "batch"), psum(positive, "batch"),
                      psum(loss, "batch"), pmax(positive, "batch")};
  };
  Array w = randomArray(DType::f64, {3}, 8), x = randomArray(DType::f64, {16, 3}, 9);
  auto run = [&](const std::string& devices, int accumulate) {
    auto f = pmap(step, {.inAxes = {replicated, split}, .outAxes = std::vector<Axis>(9, replicated),
                         .devices = devices, .accumulate = accumulate});
    f(w, x);
    std::vector<std::vector<double>> out;
    std::apply([&](const auto&... value) { (out.push_back(asDoubles(value)), ...); }, f(w, x));
    return out;
  };
  for (const char* backend : {"cpu", "sim"}) {
    const auto reference = run(backend + std::string(":4"), 1);
    for (auto [devices, accumulate] : {std::pair{":2", 2}, {":1", 4}})
      EXPECT_EQ(run(backend + std::string(devices), accumulate), reference) << backend << devices << " x " << accumulate;
  }
}

TEST(PmapBadInputTest, AccumulationNeedsAPowerOfTwoThatSplitsTheBatch) {
  auto f = [](const Tensor& x) { return sum(x, {0}); };
  EXPECT_NE(errorOf([&] { pmap(f, {.inAxes = {split}, .devices = "cpu:2", .accumulate = 3}); })
                .find("accumulate is 3; give a power of two"),
            std::string::npos);
  auto g = pmap(f, {.inAxes = {split}, .devices = "cpu:2", .accumulate = 4});
  EXPECT_NE(errorOf([&] { g(Array::zeros(DType::f32, {12})); }).find("cannot split into equal micro-batches"),
            std::string::npos);
}

// Micro-batches at once: 0 (the thread share's count) to accumulate; the share says how many.
TEST(PmapBadInputTest, MicroBatchesAtOnceRangeFromZeroToAccumulate) {
  auto f = [](const Tensor& x) { return sum(x, {0}); };
  for (int atOnce : {-1, 5}) {
    const std::string error =
        errorOf([&] { pmap(f, {.inAxes = {split}, .devices = "cpu:2", .accumulate = 4, .microBatchesAtOnce = atOnce}); });
    EXPECT_NE(error.find("microBatchesAtOnce is " + std::to_string(atOnce) + " with accumulate 4; give 0"),
              std::string::npos)
        << error;
  }
  const int before = omp_get_max_threads();
  omp_set_num_threads(2);
  std::string why;
  pmap(f, {.inAxes = {split}, .devices = "cpu:1", .accumulate = 4}).threadsPerReplica(&why);
  omp_set_num_threads(before);
  EXPECT_NE(why.find("; 2 micro-batches of each replica run at once"), std::string::npos) << why;
}

TEST(PmapTest, AdamSeesAveragedGradients) {
  // A linear classifier without BN: the mean loss over the global batch equals the mean of the
  // shards' mean losses, so 2 Adam steps on cpu:4 (split batch) must equal 2 Adam steps on one
  // device over the whole batch. Adam is nonlinear in the gradient: a pmean placed after the
  // update instead of on the gradient would not match.
  optim::Adam adam({.learningRate = 0.05});
  auto loss = [](const Tree& p, const Tensor& x, const Tensor& y) {
    return mean(softmaxCrossEntropy(matmul(x, p.at("w"), p.at("b")), y), {0});
  };
  auto body = [&](const Tree& p, const Tree& s, const Tensor& x, const Tensor& y) {
    auto [l, g] = value_and_grad([&](const Tree& q) { return loss(q, x, y); })(p);
    auto [np, ns] = adam.update(p, g, s);
    return std::tuple{np, ns, l};
  };
  auto spmdStep = pmap(body, {.inAxes = {replicated, replicated, split, split}, .devices = "cpu:4"});
  auto oneDevice = jit(body);
  Tree params;
  params.set("w", randomArray(DType::f64, {6, 5}, 1));
  params.set("b", randomArray(DType::f64, {5}, 2));
  Tree state = adam.init(params);
  Array x = randomArray(DType::f64, {16, 6}, 3);
  std::vector<int32_t> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = (i * 3) % 5;
  Array y = Array::of<int32_t>({16}, labels);
  Tree p1 = params, s1 = state, p2 = params, s2 = state;
  for (int step = 0; step < 2; ++step) {
    auto [np1, ns1, l1] = spmdStep(p1, s1, x, y);
    auto [np2, ns2, l2] = oneDevice(p2, s2, x, y);
    p1 = np1, s1 = ns1, p2 = np2, s2 = ns2;
    EXPECT_NEAR(values<double>(l1)[0], values<double>(l2)[0], 1e-14);
  }
  for (const char* name : {"w", "b"})
    for (size_t i = 0; i < values<double>(p2.at(name)).size(); ++i)
      EXPECT_NEAR(values<double>(p1.at(name))[i], values<double>(p2.at(name))[i], 1e-13) << name << i;
}

TEST(PmapTest, RecompilesOnlyForANewSignatureAndSaysWhy) {
  auto f = pmap([](const Tensor& x) { return pmean(sum(x, {0}), "batch"); },
                {.inAxes = {spmd::split}, .devices = "cpu:2"});
  f(randomArray(DType::f32, {4, 3}, 1));
  f(randomArray(DType::f32, {4, 3}, 2));
  EXPECT_EQ(f.compileCount(), 1);
  f(randomArray(DType::f32, {6, 3}, 3));
  EXPECT_EQ(f.compileCount(), 2);
  EXPECT_EQ(f.lastCompileReason(), "argument 0 was split:f32[4, 3], now split:f32[6, 3]");
}

TEST(PmapTest, RecompileReasonNamesTheTreePath) {
  auto f = pmap([](const Tree& p, const Tensor& x) { return sum(mul(x, p.at("layer.w")), {0}); },
                {.inAxes = {replicated, split}, .devices = "cpu:2"});
  Tree p;
  p.set("layer.w", randomArray(DType::f32, {3}, 1));
  f(p, randomArray(DType::f32, {4, 3}, 2));
  p.set("layer.w", randomArray(DType::f64, {3}, 1));
  EXPECT_NE(errorOf([&] { f(p, randomArray(DType::f32, {4, 3}, 2)); }), "no error") << "f64 * f32 must not trace";
  EXPECT_EQ(f.lastCompileReason(), "argument 0.layer.w was replicated:f32[3], now replicated:f64[3]");
}

//===--- bad input: each with its exact error ------------------------------------------------===//

TEST(PmapBadInputTest, GlobalBatchNotDivisibleByDeviceCount) {
  auto f = pmap([](const Tensor& x) { return sum(x, {0}); }, {.inAxes = {split}, .devices = "cpu:4"});
  EXPECT_EQ(errorOf([&] { f(randomArray(DType::f32, {10, 3}, 1)); }),
            "spmd::pmap 'main': argument 0 (f32[10, 3]) is a global batch of 10 split over 4 "
            "devices (spmd::split), but 10 is not divisible by 4; use a multiple of 4, such as 8 "
            "or 12");
  EXPECT_EQ(errorOf([&] { f(randomArray(DType::f32, {3, 3}, 1)); }),
            "spmd::pmap 'main': argument 0 (f32[3, 3]) is a global batch of 3 split over 4 "
            "devices (spmd::split), but 3 is not divisible by 4; use a multiple of 4, such as 4");
}

TEST(PmapBadInputTest, LeadingAxisIsNotTheDeviceCount) {
  auto f = pmap([](const Tree& p, const Tensor& x) { return sum(x, {0, 1}); },
                {.inAxes = {replicated, 0}, .devices = "cpu:4"});
  EXPECT_EQ(errorOf([&] { f(Tree{}, randomArray(DType::f32, {3, 8, 2}, 1)); }),
            "spmd::pmap 'main': argument 1 (f32[3, 8, 2]) is mapped over its leading axis "
            "(inAxes 0), which must equal the device count 4, but it is 3; stack it as [4, "
            "local_batch, ...], or pass a global batch with spmd::split");
}

TEST(PmapBadInputTest, InAxesOfTheWrongLength) {
  auto f = pmap([](const Tensor& a, const Tensor& b) { return add(a, b); },
                {.inAxes = {0, 0, replicated}, .devices = "cpu:2"});
  EXPECT_EQ(errorOf([&] { f(randomArray(DType::f32, {2, 3}, 1), randomArray(DType::f32, {2, 3}, 2)); }),
            "spmd::pmap 'main': inAxes has 3 entries but the function is called with 2 "
            "arguments; give one per argument (spmd::replicated, 0 or spmd::split)");
}

TEST(PmapBadInputTest, MoreDevicesThanExistAndEmptyDeviceLists) {
  ::unsetenv("SPMD_CPU_DEVICE_COUNT");
  auto make = [](const std::string& devices) {
    return [devices] { pmap([](const Tensor& x) { return x; }, {.devices = devices}); };
  };
  EXPECT_EQ(errorOf(make("cpu:9")),
            "device list 'cpu:9' asks for 9 CPU devices but 8 exist; use at most cpu:8 or set "
            "SPMD_CPU_DEVICE_COUNT=9 to emulate more");
  EXPECT_EQ(errorOf(make("cpu:0")),
            "device list 'cpu:0' is empty (0 devices): ask for at least one, e.g. cpu:1");
  EXPECT_EQ(errorOf(make("cpu:")),
            "device list 'cpu:' is empty: give a device count after 'cpu:', e.g. cpu:2");
  std::string unknown = errorOf(make("tpu:2"));  // the forms of every backend this build has
  EXPECT_EQ(unknown.rfind("device list 'tpu:2': unknown backend 'tpu'; valid forms: cpu, cpu:N (N emulated "
                          "devices); sim, sim:N (N simulated accelerators",
                          0),
            0u)
      << unknown;
  ::setenv("SPMD_CPU_DEVICE_COUNT", "16", 1);
  EXPECT_NO_THROW(make("cpu:9")());
  ::unsetenv("SPMD_CPU_DEVICE_COUNT");
}

TEST(PmapBadInputTest, CollectiveOnAnAxisThatIsNotBound) {
  int line = 0;
  auto f = pmap([&](const Tensor& x) { line = __LINE__ + 1;
                  return pmean(x, "model"); }, {.devices = "cpu:2"});
  std::string message = errorOf([&] { f(randomArray(DType::f32, {2, 3}, 1)); });
  EXPECT_EQ(message, "tests/unit/PmapTest.cpp:" + std::to_string(line) +
                         ": spmd::pmean over axis 'model', which is not bound; the enclosing "
                         "spmd::pmap binds axis 'batch' (its axisName option)");
  auto g = jit([&](const Tensor& x) { line = __LINE__ + 1;
                 return psum(x, "batch"); });
  message = errorOf([&] { g(randomArray(DType::f32, {2, 3}, 1)); });
  EXPECT_EQ(message,
            "tests/unit/PmapTest.cpp:" + std::to_string(line) +
                ": spmd::psum over axis 'batch': no axis is bound here; collectives need a "
                "function mapped by spmd::pmap (spmd::jit binds none)");
}

TEST(PmapBadInputTest, StrictModeNamesTheOutputAndTheLine) {
  int line = 0;
  auto f = pmap(
      [&](const Tensor& w, const Tensor& x) {
        line = __LINE__ + 1;
        Tensor loss = sum(mul(w, x), {0});
        return std::tuple{loss, w};
      },
      {.inAxes = {replicated, 0}, .devices = "cpu:2", .strict = true});
  std::string message = errorOf([&] { f(randomArray(DType::f32, {3}, 1), randomArray(DType::f32, {2, 3}, 2)); });
  EXPECT_NE(message.find("tests/unit/PmapTest.cpp:" + std::to_string(line)), std::string::npos) << message;
  EXPECT_NE(message.find("spmd-insert-pmean (strict): replicated output 0 ('0') varies across "
                         "axis 'batch' (it is computed from mapped data); average it with "
                         "spmd::pmean(value, \"batch\") or return it mapped (out_axes)"),
            std::string::npos) << message;
}

// Logits returned without outAxes vary across replicas and are neither a scalar nor the new value
// of a replicated input: a compile error at the user's line (never a silent average); with
// outAxes = 0 the same function returns each replica's logits.
TEST(PmapBadInputTest, VaryingNonScalarOutputWithoutOutAxesIsAnErrorAtItsLine) {
  int line = 0;
  auto logitsAndLoss = [&](const Tensor& w, const Tensor& x) {
    line = __LINE__ + 1;
    Tensor logits = matmul(x, w);
    return std::tuple{logits, mean(sum(logits, {1}), {0})};
  };
  Array w = randomArray(DType::f64, {3, 2}, 1), x = randomArray(DType::f64, {4, 3}, 2);
  auto averaged = pmap(logitsAndLoss, {.inAxes = {replicated, split}, .devices = "cpu:2"});
  std::string message = errorOf([&] { averaged(w, x); });
  EXPECT_NE(message.find("tests/unit/PmapTest.cpp:" + std::to_string(line)), std::string::npos) << message;
  // The user's line first; the compiler's pass last, in parentheses.
  EXPECT_EQ(message.rfind("tests/unit/PmapTest.cpp:", 0), 0u) << message;
  EXPECT_NE(message.find("(in the compiler's pass --spmd-insert-pmean)"), std::string::npos) << message;
  EXPECT_NE(message.find("replicated output 0 ('0') of type 'tensor<2x2xf64>' varies across axis 'batch'"),
            std::string::npos) << message;
  EXPECT_NE(message.find("return it per replica with outAxes = 0"), std::string::npos) << message;

  auto mapped = pmap(logitsAndLoss, {.inAxes = {replicated, split}, .outAxes = {0, replicated}, .devices = "cpu:2"});
  auto [logits, loss] = mapped(w, x);
  ASSERT_EQ(logits.shape(), (Shape{2, 2, 2}));
  auto wv = w.values<double>(), xv = x.values<double>();
  double total = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) {
      double expected = 0;
      for (int k = 0; k < 3; ++k) expected += xv[r * 3 + k] * wv[k * 2 + c];
      EXPECT_NEAR(values<double>(logits)[r * 2 + c], expected, 1e-14);
      total += expected;
    }
  EXPECT_NEAR(values<double>(loss)[0], total / 4, 1e-14) << "the scalar loss is averaged over replicas";

  // A mapped argument returned as it is has no line of its own in the step: the error names the
  // line that made the pmap (not spmd's).
  const int pmapLine = __LINE__ + 1;
  auto passthrough = pmap([](const Tensor& v) { return v; }, {.inAxes = {split}, .devices = "cpu:2"});
  message = errorOf([&] { passthrough(x); });
  EXPECT_NE(message.find("tests/unit/PmapTest.cpp:" + std::to_string(pmapLine)), std::string::npos) << message;
  EXPECT_EQ(message.find("Pmap.cpp"), std::string::npos) << message;
  EXPECT_NE(message.find("replicated output 0"), std::string::npos) << message;
}

TEST(PmapBadInputTest, AReplicaThatThrowsStopsAllReplicasAndIsNamed) {
  // Replica 2's labels are out of range: its softmax cross-entropy throws mid-step while the
  // others wait in the loss all-reduce; all must stop at once with replica 2's error.
  int line = 0;
  auto f = pmap(
      [&](const Tensor& logits, const Tensor& labels) {
        line = __LINE__ + 1;
        Tensor loss = softmaxCrossEntropy(logits, labels);
        return mean(loss, {0});
      },
      {.inAxes = {split, split}, .devices = "cpu:4", .collectiveTimeoutSeconds = 30});
  Array logits = randomArray(DType::f32, {8, 5}, 1);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 0, 1, 2};
  EXPECT_NO_THROW(f(logits, Array::of<int32_t>({8}, labels)));
  labels[5] = 7;  // row 1 of replica 2's chunk
  auto start = std::chrono::steady_clock::now();
  std::string message = errorOf([&] { f(logits, Array::of<int32_t>({8}, labels)); });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(message, "replica 2 of 4 (cpu:2) failed, so all replicas stopped: step 0 "
                     "'softmax_cross_entropy' (tests/unit/PmapTest.cpp:" + std::to_string(line) +
                     ") failed on cpu:2: label 7 at row 1 is out of range [0, 5)");
  EXPECT_LT(seconds, 5.0) << "the other replicas must stop at once, not at the timeout";
  // The group recovers: the next good call runs.
  EXPECT_NO_THROW(f(logits, Array::of<int32_t>({8}, std::vector<int32_t>{0, 1, 2, 3, 4, 0, 1, 2})));
}

// ppermute: a ring and a partial shift on cpu:4 and sim:4 (the library's pointer exchange),
// f32 and i32; a replica no pair names receives zeros; its gradient goes back along the
// inverted pairs; bad pairs are errors at the user's line.
TEST(PmapTest, PpermuteSendsEachReplicasValueAlongThePairs) {
  const int n = 4;
  for (const char* devices : {"cpu:4", "sim:4"}) {
    SCOPED_TRACE(devices);
    auto f = pmap(
        [](const Tensor& x, const Tensor& ids) {
          const std::vector<std::pair<int64_t, int64_t>> ring = {{0, 1}, {1, 2}, {2, 3}, {3, 0}}, shift = {{0, 1}, {1, 2}};
          auto [loss, g] = value_and_grad([&](const Tensor& v) { return sum(mul(ppermute(v, "batch", shift), v), {0}); })(x);
          return std::tuple{ppermute(x, "batch", ring), ppermute(ids, "batch", shift), g};
        },
        {.inAxes = {0, 0}, .outAxes = {0, 0, 0}, .devices = devices});
    Array x = randomArray(DType::f32, {n, 3}, 21, -1, 1);
    Array ids = Array::zeros(DType::i32, {n, 2});
    for (int64_t i = 0; i < n * 2; ++i) ids.values<int32_t>()[i] = int32_t(10 * (i / 2) + i % 2 + 1);
    auto [ring, shifted, g] = f(x, ids);
    auto xv = x.values<float>();
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(values<float>(ring)[r * 3 + i], xv[((r + n - 1) % n) * 3 + i]) << r;
        // d/dx_r of sum_s sum(ppermute(x)_s * x_s): x_{r-1} (what r received) plus x_{r+1} (what
        // r's value multiplied where it went), each only where the shift has that pair.
        float want = (r >= 1 && r <= 2 ? xv[(r - 1) * 3 + i] : 0.0f) + (r <= 1 ? xv[(r + 1) * 3 + i] : 0.0f);
        EXPECT_FLOAT_EQ(values<float>(g)[r * 3 + i], want) << r << " " << i;
      }
    const std::vector<int32_t> wantIds = {0, 0, 1, 2, 11, 12, 0, 0};
    EXPECT_EQ(values<int32_t>(shifted), wantIds);
  }
  Array x = randomArray(DType::f32, {n, 3}, 22);
  auto twice = pmap([](const Tensor& v) { return ppermute(v, "batch", {{0, 2}, {1, 2}}); }, {.devices = "cpu:4"});
  const std::string error = errorOf([&] { twice(x); });
  EXPECT_NE(error.find("PmapTest.cpp:"), std::string::npos) << error;
  EXPECT_NE(error.find("spmd::ppermute over axis 'batch': replica 2 is the destination of two pairs; each replica "
                       "receives at most once"),
            std::string::npos)
      << error;
  auto outside = pmap([](const Tensor& v) { return ppermute(v, "batch", {{0, 4}}); }, {.devices = "cpu:4"});
  EXPECT_NE(errorOf([&] { outside(x); }).find("pair (0, 4) names replica 4, but the axis has replicas 0..3"),
            std::string::npos)
      << errorOf([&] { outside(x); });
  auto accumulated = pmap([](const Tensor& v) { return ppermute(v, "batch", {{0, 1}}); },
                          {.inAxes = {split}, .outAxes = {split}, .devices = "cpu:2", .accumulate = 2});
  EXPECT_NE(errorOf([&] { accumulated(x); }).find("with gradient accumulation is not supported"), std::string::npos)
      << errorOf([&] { accumulated(x); });
}

// allToAll against its definition, computed here: replica j's result is chunk j (along the split
// axis) of every replica's operand, concatenated in replica order along the concat axis; the
// same axis and another, on cpu:4 and sim:4, f32 and i32; the gradient is all_to_all back.
TEST(PmapTest, AllToAllExchangesChunksAsItsDefinitionSays) {
  const int n = 4;
  for (const char* devices : {"cpu:4", "sim:4"}) {
    SCOPED_TRACE(devices);
    auto f = pmap(
        [](const Tensor& x, const Tensor& ids) {
          auto [loss, g] = value_and_grad([](const Tensor& v) {
            Tensor y = allToAll(v, "batch", 1, 0);
            return sum(mul(y, y), {0, 1, 2});
          })(x);
          return std::tuple{allToAll(x, "batch", 1, 0), allToAll(x, "batch", 1, 1), allToAll(ids, "batch", 0, 0), g};
        },
        {.inAxes = {0, 0}, .outAxes = {0, 0, 0, 0}, .devices = devices});
    // One replica's x: [2, 8, 3]; ids: [4].
    Array x = randomArray(DType::f32, {n, 2, 8, 3}, 31, -1, 1);
    Array ids = Array::zeros(DType::i32, {n, 4});
    for (int64_t i = 0; i < n * 4; ++i) ids.values<int32_t>()[i] = int32_t(100 * (i / 4) + i % 4);
    auto [across, along, idsOut, g] = f(x, ids);
    auto xv = x.values<float>();
    auto at = [&](int r, int64_t i, int64_t j, int64_t k) { return xv[((r * 2 + i) * 8 + j) * 3 + k]; };
    // split 1 (8 -> chunks of 2), concat 0 (2 -> 8): result [8, 2, 3] per replica.
    for (int me = 0; me < n; ++me)
      for (int s = 0; s < n; ++s)
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j)
            for (int64_t k = 0; k < 3; ++k) {
              const float want = at(s, i, me * 2 + j, k);
              EXPECT_EQ(values<float>(across)[((me * 8 + s * 2 + i) * 2 + j) * 3 + k], want) << me << s << i << j << k;
              // split and concat both 1: [2, 8, 3] with axis 1 as (replica, chunk).
              EXPECT_EQ(values<float>(along)[((me * 2 + i) * 8 + s * 2 + j) * 3 + k], want) << me << s << i << j << k;
              // d/dx of sum(y * y), y = allToAll(x): 2 x, routed back to where each element came from.
              EXPECT_FLOAT_EQ(values<float>(g)[((s * 2 + i) * 8 + me * 2 + j) * 3 + k], 2 * want);
            }
    // ids [4] per replica, split and concat 0: replica me gets element me of every replica.
    for (int me = 0; me < n; ++me)
      for (int s = 0; s < n; ++s) EXPECT_EQ(values<int32_t>(idsOut)[me * 4 + s], 100 * s + me) << me << " " << s;
  }
  Array x = randomArray(DType::f32, {n, 6}, 32);
  auto uneven = pmap([](const Tensor& v) { return allToAll(v, "batch", 0, 0); }, {.devices = "cpu:4"});
  const std::string error = errorOf([&] { uneven(x); });
  EXPECT_NE(error.find("PmapTest.cpp:"), std::string::npos) << error;
  EXPECT_NE(error.find("spmd::allToAll over axis 'batch': f32[6] has 6 along split axis 0, which does not split into 4 "
                       "equal chunks, one per replica"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// Cross-replica statistics with gradient accumulation (as cross-replica BatchNorm with
// PmapOptions::accumulate): each micro-batch takes its statistics over its own replicas, and a
// replicated output computed from them (the running statistics) is averaged over the
// micro-batches, as are the gradients and the loss. So A micro-batches on cpu:2 give the mean of
// A separate cpu:2 steps, one per micro-batch.
TEST(PmapTest, CrossReplicaStatisticsWithAccumulationAverageTheMicroBatches) {
  int statisticLine = 0;  // the line of the statistic's pmean, which the compile's note names
  auto step = [&statisticLine](const Tensor& w, const Tensor& running, const Tensor& x) {
    auto [loss, grad, batchMean] = value_and_grad(
        [&](const Tensor& wv) {
          Tensor h = mul(x, broadcastTo(wv, x.shape()));
          const spmd::Loc at = spmd::Loc::current();
          statisticLine = int(at.line());
          Tensor m = pmean(mean(h, {0}), "batch", at);  // the statistic over the micro-batch's replicas
          Tensor centred = sub(h, broadcastTo(m, h.shape()));
          return std::pair{mean(sum(mul(centred, centred), {1}), {0}), m};
        },
        has_aux)(w);
    return std::tuple{loss, grad, add(mul(running, 0.9), mul(batchMean, 0.1))};
  };
  Array w = randomArray(DType::f64, {3}, 11), running = randomArray(DType::f64, {3}, 12),
        x = randomArray(DType::f64, {8, 3}, 13, -2, 2);
  // Called twice, on cpu with 2 micro-batches at once: the second call runs them together, each
  // group's replicas all-reducing among themselves. On sim (one at a time) the micro part's
  // all-reduce and the fold run on the device.
  for (const std::string devices : {"cpu:2", "sim:2"}) {
    auto run = [&](const Array& batch, int accumulate) {
      auto f = pmap(step, {.inAxes = {replicated, replicated, split}, .devices = devices, .accumulate = accumulate,
                           .microBatchesAtOnce = devices == "cpu:2" ? accumulate : 0});
      f(w, running, batch);
      auto [loss, grad, next] = f(w, running, batch);
      return std::vector<std::vector<double>>{values<double>(loss), values<double>(grad), values<double>(next)};
    };
    ::testing::internal::CaptureStderr();
    const auto accumulated = run(x, 2);

    // Said when it compiles, naming where (the pmean and its transpose: one line, said once).
    const std::string note = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(note.find("with accumulate = 2, 1 all-reduce reduces over each micro-batch's 2 replicas, not all 4, "
                        "because its result feeds work that varies with the batch"),
              std::string::npos)
        << note;
    EXPECT_NE(note.find("PmapTest.cpp:" + std::to_string(statisticLine) + ". So the step is not the one 4 devices run"),
              std::string::npos)
        << note;
    // Micro-batch a: rows 2a, 2a + 1 of replica 0's half and of replica 1's.
    std::vector<std::vector<double>> expected;
    for (int a = 0; a < 2; ++a) {
      Array part = Array::zeros(DType::f64, {4, 3});
      int row = 0;
      for (int r = 0; r < 2; ++r)
        for (int i = 0; i < 2; ++i, ++row)
          for (int j = 0; j < 3; ++j) part.values<double>()[row * 3 + j] = x.values<double>()[(r * 4 + a * 2 + i) * 3 + j];
      const auto one = run(part, 1);
      if (expected.empty()) expected.assign(one.size(), {});
      for (size_t o = 0; o < one.size(); ++o) {
        expected[o].resize(one[o].size());
        for (size_t i = 0; i < one[o].size(); ++i) expected[o][i] += one[o][i] / 2;
      }
    }
    const char* names[] = {"loss", "gradient", "running statistic"};
    for (size_t o = 0; o < expected.size(); ++o)
      for (size_t i = 0; i < expected[o].size(); ++i)
        EXPECT_NEAR(accumulated[o][i], expected[o][i], 1e-14 * (1 + std::abs(expected[o][i])))
            << devices << " " << names[o] << " " << i;
    // And the statistics really were per micro-batch: over the whole batch, the running one differs.
    auto whole = pmap(step, {.inAxes = {replicated, replicated, split}, .devices = devices});
    auto [l, g, next] = whole(w, running, x);
    EXPECT_GT(std::abs(values<double>(next)[0] - expected[2][0]) + std::abs(values<double>(l)[0] - expected[0][0]), 1e-6)
        << devices;
  }
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// Collectives as JAX's on integers and on trees of mixed dtypes (issue 54 item 3): psum, pmax,
// pmin, allGather and psumScatter keep i32; pmean of an integer is a float mean (as jnp.mean);
// a Tree reduces leaf by leaf whatever the leaves' dtypes.
TEST(PmapTest, CollectivesOnIntegersAndMixedTrees) {
  for (const char* devices : {"cpu:4", "sim:4"}) {
  SCOPED_TRACE(devices);
  const int n = 4;
  auto f = pmap(
      [](const Tensor& x, const Tensor& k) {
        Tree tree;
        tree.set("x", x);
        tree.set("k", k);
        Tree summed = psum(tree, "batch"), averaged = pmean(tree, "batch");
        return std::tuple{summed.at("x"), summed.at("k"), averaged.at("x"), averaged.at("k"), pmax(k, "batch"),
                          pmin(k, "batch"), psumScatter(allGather(k, "batch"), "batch")};
      },
      {.inAxes = {0, 0}, .outAxes = {replicated, replicated, replicated, replicated, replicated, replicated, 0},
       .devices = devices});
  Array x = randomArray(DType::f32, {n, 3}, 5);
  Array k = Array::of<int32_t>({n, 3}, std::vector<int32_t>{1, -7, 100000, 2, 5, 3, -4, 0, 9, 6, 1, 7});
  auto [sx, sk, mx, mk, hi, lo, scattered] = f(x, k);
  EXPECT_EQ(sk.dtype(), DType::i32);
  EXPECT_EQ(mk.dtype(), DType::f32) << "the mean of integers is a float, as jnp.mean's";
  EXPECT_EQ(hi.dtype(), DType::i32);
  EXPECT_EQ(scattered.dtype(), DType::i32);
  auto kv = k.values<int32_t>();
  auto xv = x.values<float>();
  for (int i = 0; i < 3; ++i) {
    int32_t s = 0, top = INT32_MIN, bottom = INT32_MAX;
    float fs = 0;
    for (int r = 0; r < n; ++r) {
      s += kv[r * 3 + i], fs += xv[r * 3 + i];
      top = std::max(top, kv[r * 3 + i]), bottom = std::min(bottom, kv[r * 3 + i]);
    }
    EXPECT_EQ(values<int32_t>(sk)[i], s);
    EXPECT_FLOAT_EQ(values<float>(mk)[i], float(s) / n);
    EXPECT_FLOAT_EQ(values<float>(sx)[i], fs);
    EXPECT_FLOAT_EQ(values<float>(mx)[i], fs / n);
    EXPECT_EQ(values<int32_t>(hi)[i], top);
    EXPECT_EQ(values<int32_t>(lo)[i], bottom);
    for (int r = 0; r < n; ++r) EXPECT_EQ(values<int32_t>(scattered)[r * 3 + i], n * kv[r * 3 + i]);
  }
  }
}

// pbroadcast: replica 2's bits on every replica, a replicated output with nothing inserted; its
// gradient reaches replica 2 only, summed over the replicas' seeds (pmap semantics).
TEST(PmapTest, PbroadcastGivesOneReplicasBitsToAll) {
  const int n = 4;
  auto f = pmap(
      [](const Tensor& x) {
        auto [loss, g] = value_and_grad([](const Tensor& v) { return sum(pbroadcast(v, "batch", 2), {0}); })(x);
        return std::tuple{pbroadcast(x, "batch", 2), g};
      },
      {.inAxes = {0}, .outAxes = {replicated, 0}, .devices = "cpu:4", .strict = true});
  Array x = randomArray(DType::f32, {n, 5}, 9);
  auto [y, g] = f(x);
  auto xv = x.values<float>();
  EXPECT_EQ(values<float>(y), std::vector<float>(xv.begin() + 10, xv.begin() + 15));
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < 5; ++i) EXPECT_EQ(values<float>(g)[r * 5 + i], r == 2 ? float(n) : 0.0f) << r << " " << i;
  auto bad = pmap([](const Tensor& v) { return pbroadcast(v, "batch", 4); }, {.devices = "cpu:4"});
  EXPECT_NE(errorOf([&] { bad(x); }).find("PmapTest.cpp:"), std::string::npos);
  EXPECT_NE(errorOf([&] { bad(x); }).find("spmd::pbroadcast over axis 'batch' from replica 4, but the axis has replicas "
                                          "0..3; name one of them"),
            std::string::npos)
      << errorOf([&] { bad(x); });
}

// jax's in_axes / out_axes as tree prefixes: a Tree argument's leaves each with their own axis
// (spmd::perLeaf), the leaves not named taking the rest; outputs likewise; a name that is no
// leaf, or leaves given for a tensor, is an error.
TEST(PmapTest, AxesPerLeafOfATree) {
  auto f = pmap(
      [](const Tree& t) {
        Tree out;
        out.set("scaled", t.at("x") * t.at("w"));  // per replica: its row of x, the whole w
        out.set("total", psum(t.at("x"), "batch"));
        return std::tuple{out, t.at("w") + 1.0};
      },
      {.inAxes = {perLeaf({{"w", replicated}}, 0)},
       .outAxes = {perLeaf({{"total", replicated}}, 0), replicated},
       .devices = "cpu:4"});
  Array x = randomArray(DType::f32, {4, 3}, 31), w = randomArray(DType::f32, {3}, 32);
  Tree in;
  in.set("x", x), in.set("w", w);
  auto [out, w1] = f(in);
  ASSERT_EQ(out.at("scaled").shape(), (Shape{4, 3}));
  ASSERT_EQ(out.at("total").shape(), (Shape{3}));
  ASSERT_EQ(w1.shape(), (Shape{3}));
  auto xv = x.values<float>(), wv = w.values<float>();
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(values<float>(out.at("scaled"))[r * 3 + j], xv[r * 3 + j] * wv[j]);
  for (int j = 0; j < 3; ++j) {
    double total = 0;
    for (int r = 0; r < 4; ++r) total += xv[r * 3 + j];
    EXPECT_NEAR(values<float>(out.at("total"))[j], total, 1e-5);
    EXPECT_EQ(values<float>(w1)[j], wv[j] + 1.f);
  }
  auto typo = pmap([](const Tree& t) { return t.at("x"); },
                   {.inAxes = {perLeaf({{"wieght", replicated}}, 0)}, .outAxes = {0}, .devices = "cpu:4"});
  const std::string error = errorOf([&] { typo(in); });
  EXPECT_NE(error.find("argument 0 (inAxes) names leaf 'wieght' (spmd::perLeaf), which the tree does not have; its "
                       "leaves: w, x"),
            std::string::npos)
      << error;
  auto onTensor = pmap([](const Tensor& t) { return t; },
                       {.inAxes = {perLeaf({{"x", replicated}}, 0)}, .outAxes = {0}, .devices = "cpu:4"});
  EXPECT_NE(errorOf([&] { onTensor(x); }).find("is a tensor, but its axis names leaves"), std::string::npos);
}

// jax's in_axes / out_axes on another dimension: a leaf stacked over dimension 1 (or -1) gives
// replica r its slice there; an output stacked over dimension -1 puts the replicas last.
TEST(PmapTest, InAndOutAxesOnOtherDimensions) {
  auto f = pmap([](const Tensor& x, const Tensor& y) { return std::tuple{x * 2.0 + sum(y, {0}), psum(x, "batch")}; },
                {.inAxes = {1, -1}, .outAxes = {-1, replicated}, .devices = "cpu:4"});
  Array x = randomArray(DType::f32, {3, 4, 5}, 21), y = randomArray(DType::f32, {6, 4}, 22);
  auto [stacked, total] = f(x, y);
  ASSERT_EQ(stacked.shape(), (Shape{3, 5, 4}));
  ASSERT_EQ(total.shape(), (Shape{3, 5}));
  auto xv = x.values<float>(), yv = y.values<float>();
  for (int r = 0; r < 4; ++r) {
    float ySum = 0;  // replica r's y is y[:, r]
    for (int k = 0; k < 6; ++k) ySum += yv[k * 4 + r];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j)
        EXPECT_NEAR(values<float>(stacked)[(i * 5 + j) * 4 + r], xv[(i * 4 + r) * 5 + j] * 2 + ySum, 1e-5) << r;
  }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double expected = 0;
      for (int r = 0; r < 4; ++r) expected += xv[(i * 4 + r) * 5 + j];
      EXPECT_NEAR(values<float>(total)[i * 5 + j], expected, 1e-5) << i << " " << j;
    }
  auto bad = pmap([](const Tensor& x) { return x; }, {.inAxes = {3}, .outAxes = {0}, .devices = "cpu:4"});
  EXPECT_NE(errorOf([&] { bad(x); }).find("is mapped over its dimension 3 (inAxes), but it has 3 dimension(s); give "
                                          "one of 0..2 or -3..-1"),
            std::string::npos)
      << errorOf([&] { bad(x); });
  auto wrongSize = pmap([](const Tensor& x) { return x; }, {.inAxes = {2}, .outAxes = {0}, .devices = "cpu:4"});
  EXPECT_NE(errorOf([&] { wrongSize(x); }).find("is mapped over its dimension 2 (inAxes), which must equal the device "
                                                "count 4, but it is 5"),
            std::string::npos)
      << errorOf([&] { wrongSize(x); });
}

}  // namespace
}  // namespace spmd
