// The in-process communicator and the collective kernels on N threads: the CPU kernels
// (slice-per-rank reduction) against the reference kernels (all-gather, then reduce locally) on
// random data, bit-identical results on every replica, a collective that times out naming the
// missing replicas, and an abort that wakes every waiting replica at once; on the simulator, the
// same two when the replicas wait on the device.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <random>
#include <cstring>
#include <thread>

#include "TestUtil.h"
#include "runtime/device/CoreTurns.h"
#include "runtime/device/Fold.h"
#include "runtime/device/InProcessCommunicator.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/sim/SimDevice.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime {
namespace {

using spmd::testing::randomArray;

// Runs fn(rank) on n threads and returns when all are done.
template <typename Fn>
void onReplicas(int n, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { fn(r); });
  for (std::thread& t : threads) t.join();
}

struct CollectiveCase {
  std::string op;
  std::map<std::string, Attr> attrs;
  std::vector<Shape> inputs, outputs;  // one replica's
};

// Every replica runs `table`'s kernel for `c` on its own random inputs; returns outputs[r][i].
std::vector<std::vector<Array>> runCollective(const KernelTable& table, const CollectiveCase& c,
                                              int n, DType dtype) {
  auto group = std::make_shared<InProcessGroup>(n, std::chrono::seconds(30));
  std::vector<std::vector<Array>> outputs(n);
  onReplicas(n, [&](int r) {
    InProcessCommunicator comm(group, r);
    Step step{c.op, {}, {}, c.attrs, "CommunicatorTest"};
    decodeAttributes(step);
    std::vector<Array> ins;
    std::vector<TensorView> in, out;
    for (size_t i = 0; i < c.inputs.size(); ++i)
      ins.push_back(randomArray(dtype, c.inputs[i], 1000 * r + i));
    for (const Array& a : ins) in.push_back({a.data(), a.dtype, a.shape});
    for (const Shape& s : c.outputs) outputs[r].push_back(Array::zeros(dtype, s));
    for (Array& a : outputs[r]) out.push_back({a.data(), a.dtype, a.shape});
    std::shared_ptr<void> cache;
    KernelCall call{step, in, out, cache, &comm};
    table.at(c.op)(call);
    table.at(c.op)(call);  // again, with the kernel's cached staging buffer
  });
  return outputs;
}

TEST(CommunicatorTest, CpuCollectivesMatchReferenceAndAgreeBitwiseAcrossReplicas) {
  std::vector<CollectiveCase> cases;
  for (const char* reduction : {"sum", "mean", "max", "min"})
    cases.push_back({"all_reduce", {{"axis_name", std::string("batch")}, {"reduction", std::string(reduction)}},
                     {{7, 3}}, {{7, 3}}});
  // A combined all_reduce over three tensors (one flat buffer).
  cases.push_back({"all_reduce", {{"axis_name", std::string("batch")}, {"reduction", std::string("mean")}},
                   {{5}, {2, 3}, {1}}, {{5}, {2, 3}, {1}}});
  for (int n : {1, 2, 3, 5}) {
    for (DType dtype : {DType::f32, DType::f64}) {
      std::vector<CollectiveCase> all = cases;
      all.push_back({"all_gather", {{"axis_name", std::string("batch")}, {"axis_size", int64_t(n)}},
                     {{4, 2}}, {{n, 4, 2}}});
      for (const char* reduction : {"sum", "mean"})
        all.push_back({"reduce_scatter", {{"axis_name", std::string("batch")}, {"reduction", std::string(reduction)}},
                       {{n, 3}}, {{3}}});
      // A shift by one (the last replica's value goes nowhere, replica 0 receives zeros).
      std::vector<int64_t> shift;
      for (int r = 0; r + 1 < n; ++r) shift.insert(shift.end(), {r, r + 1});
      all.push_back({"ppermute", {{"axis_name", std::string("batch")}, {"pairs", shift}}, {{4, 2}}, {{4, 2}}});
      for (auto [split, concat] : {std::pair<int64_t, int64_t>{0, 1}, {1, 1}})
        all.push_back({"all_to_all",
                       {{"axis_name", std::string("batch")}, {"axis_size", int64_t(n)}, {"split_axis", split},
                        {"concat_axis", concat}},
                       {{2 * n, 3 * n}},
                       {{split == 0 ? 2 : 2 * n, concat == split ? 3 * n : (split == 0 ? 3 * n * n : 3)}}});
      // Within one group of every replica in reverse order (a replica's position is not its rank).
      std::vector<int64_t> reversed;
      for (int r = n - 1; r >= 0; --r) reversed.push_back(r);
      for (auto [split, concat] : {std::pair<int64_t, int64_t>{0, 1}, {1, 0}, {0, 0}}) {
        Shape out{2 * n, 3 * n};
        out[size_t(split)] /= n, out[size_t(concat)] *= n;
        all.push_back({"all_to_all",
                       {{"axis_name", std::string("batch")}, {"axis_size", int64_t(n)}, {"split_axis", split},
                        {"concat_axis", concat}, {"replica_groups", reversed}, {"group_size", int64_t(n)}},
                       {{2 * n, 3 * n}},
                       {out}});
      }
      for (const CollectiveCase& c : all) {
        SCOPED_TRACE(c.op + " on " + std::to_string(n) + " replicas");
        auto cpu = runCollective(cpuKernels(), c, n, dtype);
        auto reference = runCollective(referenceKernels(), c, n, dtype);
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < cpu[r].size(); ++i)
            spmd::testing::expectClose(cpu[r][i], reference[r][i], 0, 0, "replica " + std::to_string(r));
        if (c.op == "all_reduce" || c.op == "all_gather") {  // replicated results: same bits everywhere
          for (int r = 1; r < n; ++r)
            for (size_t i = 0; i < cpu[r].size(); ++i)
              EXPECT_EQ(std::memcmp(cpu[r][i].data(), cpu[0][i].data(), cpu[0][i].bytes()), 0);
        }
      }
    }
  }
}

// A combined all_reduce over 3 replicas folds each rank's slice of the segments' concatenation
// (slices that cut segments) straight from the operands into the
// results, in place or into other buffers: every replica gets the fold tree's root of each
// element, bit for bit. Results that lie on another segment's operand (two outputs donated
// crosswise) are packed and unpacked instead, with the same bits.
TEST(CommunicatorTest, ACombinedAllReduceFoldsSlicesThatCutItsSegments) {
  constexpr int n = 3;
  const std::vector<int64_t> sizes{4, 4, 1000, 7};
  for (bool crosswise : {false, true}) {
    for (Reduction op : {Reduction::Sum, Reduction::Mean, Reduction::Max}) {
      auto group = std::make_shared<InProcessGroup>(n, std::chrono::seconds(30));
      std::vector<std::vector<std::vector<double>>> operands(n), results(n);
      for (int r = 0; r < n; ++r)
        for (size_t k = 0; k < sizes.size(); ++k) {
          Array a = randomArray(DType::f64, {sizes[k]}, uint64_t(100 * r + k));
          operands[r].emplace_back(a.values<double>().begin(), a.values<double>().end());
          results[r].emplace_back(size_t(sizes[k]), 99.0);
        }
      operands[1][2][3] = NAN, operands[2][0][1] = -0.0;
      const auto original = operands;
      onReplicas(n, [&](int r) {
        InProcessCommunicator comm(group, r);
        std::vector<Communicator::Segment> in, out;
        for (size_t k = 0; k < sizes.size(); ++k) in.push_back({operands[r][k].data(), sizes[k]});
        if (crosswise) {  // the first two segments' results on each other's operands (replica 0 folds both)
          out = {{operands[r][1].data(), 4}, {operands[r][0].data(), 4}, {results[r][2].data(), 1000}, {results[r][3].data(), 7}};
        } else {  // in place, into another buffer, in place, into another buffer
          out = {in[0], {results[r][1].data(), 1}, in[2], {results[r][3].data(), 7}};
        }
        comm.allReduce(in, out, DType::f64, op, "CommunicatorTest", false).wait();
      });
      for (int r = 0; r < n; ++r)
        for (size_t k = 0; k < sizes.size(); ++k)
          for (int64_t i = 0; i < sizes[k]; ++i) {
            const double want = foldLeaves<double>(n, [&](int q) { return original[q][k][size_t(i)]; }, op, n);
            const double* got = crosswise ? (k == 0 ? &operands[r][1][size_t(i)] : k == 1 ? &operands[r][0][size_t(i)]
                                                                                          : &results[r][k][size_t(i)])
                                          : (k % 2 == 0 ? &operands[r][k][size_t(i)] : &results[r][k][size_t(i)]);
            ASSERT_EQ(std::memcmp(got, &want, sizeof want), 0)
                << (crosswise ? "crosswise" : "direct") << ", replica " << r << ", segment " << k << ", element " << i;
          }
    }
  }
}

// One replica for one leaf: a combined all_reduce hands its operands back bit for bit (the fold
// of one value; -0, NaN and infinities included), in place or into other buffers, for every
// reduction, as the general path (a fold of one source, a mean divided by 1) would.
TEST(CommunicatorTest, OneReplicaAllReduceIsTheIdentityInPlaceOrNot) {
  auto group = std::make_shared<InProcessGroup>(1, std::chrono::seconds(30));
  InProcessCommunicator comm(group, 0);
  for (Reduction op : {Reduction::Sum, Reduction::Mean, Reduction::Max, Reduction::Min}) {
    std::vector<float> a{-0.0f, 1.5f, NAN, INFINITY, -3.25f}, b{7.0f, -0.0f, 1e-40f};
    const std::vector<float> a0 = a, b0 = b;
    std::vector<float> bOut(b.size(), 99.0f);
    std::vector<Communicator::Segment> in{{a.data(), int64_t(a.size())}, {b.data(), int64_t(b.size())}};
    std::vector<Communicator::Segment> out{{a.data(), int64_t(a.size())}, {bOut.data(), int64_t(bOut.size())}};
    comm.allReduce(in, out, DType::f32, op, "CommunicatorTest", false).wait();
    EXPECT_EQ(std::memcmp(a.data(), a0.data(), a.size() * sizeof(float)), 0) << "in place";
    EXPECT_EQ(std::memcmp(bOut.data(), b0.data(), b.size() * sizeof(float)), 0) << "into another buffer";
  }
}

// One replica standing for 4 leaves (accumulation's update on one device): its operands are
// its subtree's root, so the all_reduce gives each one as it is, a mean divided by 4, in place
// or into other buffers, on segments longer than the block the threads share, as the tree's
// root is (foldLeaves on the one value; NaN, -0 and subnormals included).
TEST(CommunicatorTest, OneReplicaOfSeveralLeavesFoldsItsOperandsToTheRoot) {
  auto group = std::make_shared<InProcessGroup>(1, std::chrono::seconds(30), 4);
  InProcessCommunicator comm(group, 0);
  Array big = randomArray(DType::f64, {200001}, 41);
  for (Reduction op : {Reduction::Sum, Reduction::Mean, Reduction::Max, Reduction::Min}) {
    std::vector<double> a(big.values<double>().begin(), big.values<double>().end());
    a[0] = -0.0, a[1] = NAN, a[2] = 4e-320, a[3] = INFINITY;
    std::vector<double> b{7.0, -0.0, 1e-310}, bOut(b.size(), 99.0);
    const std::vector<double> a0 = a, b0 = b;
    std::vector<Communicator::Segment> in{{a.data(), int64_t(a.size())}, {b.data(), int64_t(b.size())}};
    std::vector<Communicator::Segment> out{{a.data(), int64_t(a.size())}, {bOut.data(), int64_t(bOut.size())}};
    comm.allReduce(in, out, DType::f64, op, "CommunicatorTest", false).wait();
    auto root = [&](double v) { return foldLeaves<double>(1, [&](int) { return v; }, op, 4); };
    for (size_t i = 0; i < a.size(); ++i) {
      const double want = root(a0[i]);
      ASSERT_EQ(std::memcmp(&a[i], &want, sizeof want), 0) << "in place, element " << i;
    }
    for (size_t i = 0; i < b.size(); ++i) {
      const double want = root(b0[i]);
      ASSERT_EQ(std::memcmp(&bOut[i], &want, sizeof want), 0) << "into another buffer, element " << i;
    }
    EXPECT_EQ(b, b0) << "the operand is left as it was";
  }
  EXPECT_NE(foldLeaves<double>(1, [](int) { return 3.0; }, Reduction::Mean, 4), 3.0);  // the mean divides
}

TEST(CommunicatorTest, AxisIndexIsTheRank) {
  for (const KernelTable* table : {&cpuKernels(), &referenceKernels()}) {
    auto group = std::make_shared<InProcessGroup>(3, std::chrono::seconds(30));
    std::vector<int32_t> seen(3, -1);
    onReplicas(3, [&](int r) {
      InProcessCommunicator comm(group, r);
      Step step{"axis_index", {}, {}, {{"axis_name", std::string("batch")}}, "CommunicatorTest"};
      decodeAttributes(step);
      Array out = Array::zeros(DType::i32, {});
      std::vector<TensorView> in, outs{{out.data(), out.dtype, out.shape}};
      std::shared_ptr<void> cache;
      KernelCall call{step, in, outs, cache, &comm};
      table->at("axis_index")(call);
      seen[r] = out.values<int32_t>()[0];
    });
    EXPECT_EQ(seen, (std::vector<int32_t>{0, 1, 2}));
  }
}

TEST(CommunicatorTest, ACollectiveThatNobodyJoinsTimesOutNamingTheMissingReplicas) {
  auto group = std::make_shared<InProcessGroup>(3, std::chrono::milliseconds(200));
  InProcessCommunicator comm(group, 0);
  float data[2] = {1, 2};
  auto start = std::chrono::steady_clock::now();
  try {
    comm.allReduceInPlace(data, DType::f32, 2, Reduction::Sum, "all_reduce at model.cpp:12");
    ADD_FAILURE() << "expected a timeout";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "all_reduce at model.cpp:12 timed out after 0.2000 s on replica 0: replica(s) 1, 2 "
              "never reached it (stuck, or running a different sequence of collectives); raise "
              "the limit with SPMD_COLLECTIVE_TIMEOUT=<seconds> if a step is legitimately that slow");
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 5.0);
}

// The timeout counts time without an arrival: replicas arriving one after another, each within
// it of the last but all together well past it (as replicas taking turns do), meet.
TEST(CommunicatorTest, ReplicasArrivingOneByOneWithinTheTimeoutOfEachOtherMeet) {
  constexpr int kReplicas = 4;
  auto group = std::make_shared<InProcessGroup>(kReplicas, std::chrono::milliseconds(300));
  std::vector<std::string> errors(kReplicas);
  std::vector<float> sums(kReplicas);
  onReplicas(kReplicas, [&](int r) {
    InProcessCommunicator comm(group, r);
    std::this_thread::sleep_for(std::chrono::milliseconds(150 * r));  // the last 450 ms after the first
    float value = float(r + 1);
    try {
      comm.allReduceInPlace(&value, DType::f32, 1, Reduction::Sum, "all_reduce at CommunicatorTest");
      sums[r] = value;
    } catch (const std::exception& e) {
      errors[r] = e.what();
      comm.abort(e.what());
    }
  });
  for (int r = 0; r < kReplicas; ++r) {
    EXPECT_EQ(errors[r], "") << "replica " << r;
    EXPECT_EQ(sums[r], 10.f) << "replica " << r;
  }
}

// Replicas taking turns on the cores (runtime/device/CoreTurns.h): 6 replicas, 2 turns, each
// runs two stretches of work around all-reduces. Never more than 2 work at once, and the
// all-reduces complete: a replica waiting in one gives its turn to a replica that has not yet
// arrived (without that, the two holding turns would wait for the four waiting for one).
TEST(CommunicatorTest, ReplicasTakingTurnsMeetInCollectivesWithAtMostTheirTurnsRunning) {
  constexpr int kReplicas = 6, kTurns = 2;
  auto group = std::make_shared<InProcessGroup>(kReplicas, std::chrono::seconds(5));
  CoreTurns turns(kTurns);
  std::atomic<int> running{0}, most{0};
  auto work = [&] {
    const int now = ++running;
    for (int seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running;
  };
  std::vector<float> sums(kReplicas);
  std::vector<std::string> errors(kReplicas);
  onReplicas(kReplicas, [&](int r) {
    InProcessCommunicator comm(group, r);
    try {
      CoreTurns::Turn turn(&turns);
      float value = float(r + 1);
      for (int round = 0; round < 2; ++round) {
        work();
        comm.allReduceInPlace(&value, DType::f32, 1, Reduction::Sum, "all_reduce at CommunicatorTest");
      }
      sums[r] = value;
    } catch (const std::exception& e) {
      errors[r] = e.what();
      comm.abort(e.what());
    }
  });
  for (int r = 0; r < kReplicas; ++r) EXPECT_EQ(errors[r], "") << "replica " << r;
  EXPECT_LE(most.load(), kTurns);
  EXPECT_GE(most.load(), 1);
  for (int r = 0; r < kReplicas; ++r) EXPECT_EQ(sums[r], 21.f * kReplicas) << "replica " << r;
  // Outside a step a wait gives nothing away, and a step without turns takes none.
  CoreTurns::Aside nothing;
  CoreTurns::Turn none(nullptr);
}

TEST(CommunicatorTest, AbortWakesEveryWaitingReplicaAtOnce) {
  auto group = std::make_shared<InProcessGroup>(4, std::chrono::seconds(60));
  std::vector<std::string> errors(4);
  auto start = std::chrono::steady_clock::now();
  onReplicas(4, [&](int r) {
    InProcessCommunicator comm(group, r);
    float data = 1;
    if (r == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      comm.abort("replica 3 failed: boom");
      return;
    }
    try {
      comm.allReduceInPlace(&data, DType::f32, 1, Reduction::Sum, "all_reduce at step.cpp:7");
    } catch (const ReplicaAborted& e) {
      errors[r] = e.what();
    }
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(errors[r], "replica " + std::to_string(r) +
                             " stopped in all_reduce at step.cpp:7 because the group failed: "
                             "replica 3 failed: boom");
  EXPECT_EQ(group->failure(), "replica 3 failed: boom");
}

// The device-side rendezvous of replicas on the simulator (runtime/kernels/Collectives.h):
// replica r of n calls the all_reduce kernel on sim:n's device r while `more(r, k, comm)` says
// call k comes (the function may abort the group); returns each replica's error ("" when it
// finished). The first call exchanges the addresses on the host; later calls meet on the devices.
std::vector<std::string> simAllReduce(const std::shared_ptr<InProcessGroup>& group, int n,
                                      const std::function<bool(int, int, InProcessCommunicator&)>& more) {
  const DeviceList list = parseDeviceList("sim:" + std::to_string(n));
  std::vector<std::string> errors(static_cast<size_t>(n));
  // Every replica's device, buffers and step state outlive all the threads: a replica's kernels
  // read the others' staging and words until they are done.
  std::vector<std::shared_ptr<Device>> devices;
  std::vector<std::shared_ptr<void>> caches(static_cast<size_t>(n));
  std::vector<std::shared_ptr<std::byte>> buffers;
  for (int r = 0; r < n; ++r) {
    devices.push_back(makeDevice(list, r));
    for (int b = 0; b < 2; ++b) buffers.push_back(devices.back()->allocate(5 * sizeof(float)));
  }
  Step step{"all_reduce", {}, {}, {{"axis_name", std::string("i")}, {"reduction", std::string("sum")}}, "step.cpp:7"};
  decodeAttributes(step);
  const Shape shape{5};
  onReplicas(n, [&](int r) {
    InProcessCommunicator comm(group, r);
    Device& device = *devices[size_t(r)];
    std::vector<TensorView> in{{buffers[size_t(2 * r)].get(), DType::f32, shape}},
        out{{buffers[size_t(2 * r + 1)].get(), DType::f32, shape}};
    KernelCall call{step, in, out, caches[size_t(r)], &comm, &device};
    try {
      for (int k = 0; more(r, k, comm); ++k) simKernels().at("all_reduce")(call);
      device.synchronize();
    } catch (const std::exception& e) {
      errors[size_t(r)] = e.what();
    }
    device.synchronize();
  });
  return errors;
}

TEST(CommunicatorTest, OnTheSimulatorAReplicaThatNeverArrivesTimesOutOnTheDevice) {
  auto group = std::make_shared<InProcessGroup>(3, std::chrono::milliseconds(300));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors =
      simAllReduce(group, 3, [](int r, int k, InProcessCommunicator&) { return k < (r == 2 ? 1 : 2); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(errors[size_t(r)], "all_reduce at step.cpp:7 timed out after 0.3000 s on replica " + std::to_string(r) +
                                     ": replica 2 never reached it (stuck, or running a different sequence of "
                                     "collectives); raise the limit with SPMD_COLLECTIVE_TIMEOUT=<seconds> if a step "
                                     "is legitimately that slow");
  EXPECT_EQ(errors[2], "");
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 5.0);
}

TEST(CommunicatorTest, OnTheSimulatorAnAbortStopsTheReplicasWaitingOnTheDevice) {
  auto group = std::make_shared<InProcessGroup>(3, std::chrono::seconds(60));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> errors = simAllReduce(group, 3, [](int r, int k, InProcessCommunicator& comm) {
    if (r < 2) return k < 2;
    if (k == 1) {  // after the first call: the others wait on the device
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm.abort("replica 2 failed: boom");
    }
    return k < 1;
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(errors[size_t(r)], "replica " + std::to_string(r) + " stopped in all_reduce at step.cpp:7 because the group failed");
  EXPECT_EQ(group->failure(), "replica 2 failed: boom");
}

}  // namespace
}  // namespace spmd::runtime

namespace spmd::runtime {
namespace {

// The fold tree (runtime/device/Fold.h) from its definition, recursively.
template <typename T>
T treeNode(const std::vector<T>& v, int64_t lo, int64_t size) {
  if (size == 1) return v[lo];
  int64_t half = size / 2;
  if (lo + half >= int64_t(v.size())) return treeNode(v, lo, half);
  return foldCombine(treeNode(v, lo, half), treeNode(v, lo + half, half), Reduction::Sum);
}

// Folds `v` as holders of consecutive blocks would: each block of leaves to its roots, then
// every block's roots to the root.
template <typename T>
T foldInBlocks(const std::vector<T>& v, const std::vector<int64_t>& cuts, DType dtype) {
  std::vector<std::vector<T>> roots;
  std::vector<FoldNode> nodes;
  for (size_t b = 0; b + 1 < cuts.size(); ++b) {
    std::vector<FoldNode> leaves;
    std::vector<const void*> sources;
    for (int64_t i = cuts[b]; i < cuts[b + 1]; ++i) leaves.push_back({0, i}), sources.push_back(&v[i]);
    FoldPlan block(leaves, false);
    EXPECT_EQ(block.roots().size(), foldBlock(cuts[b], cuts[b + 1]).size());
    std::vector<std::vector<T>> mine(block.roots().size(), std::vector<T>(1));
    std::vector<void*> out;
    for (auto& r : mine) out.push_back(r.data());
    block.run(dtype, sources.data(), 0, 1, Reduction::Sum, 1, out.data());
    for (size_t k = 0; k < mine.size(); ++k) roots.push_back(mine[k]), nodes.push_back(block.roots()[k]);
  }
  std::vector<const void*> sources;
  for (auto& r : roots) sources.push_back(r.data());
  T result{};
  void* out[] = {&result};
  FoldPlan(nodes, true).run(dtype, sources.data(), 0, 1, Reduction::Sum, 1, out);
  return result;
}

// Any cut of V leaves into consecutive blocks (processes x replicas x accumulation steps) folds
// to the same bits as the V leaves at once, and those bits are the tree's by definition. The
// values cancel (1e16 or, in f32, 1e7 beside 0.7), so a left fold, or any other order, gives other bits: the
// test checks that it would notice.
template <typename T>
void checkEverySplit(DType dtype) {
  std::mt19937_64 rng(5);
  int orderSensitive = 0;
  for (int V = 1; V <= 12; ++V) {
    std::vector<T> v(V);
    for (int i = 0; i < V; ++i) {
      double big = (i % 3 == 0 ? (sizeof(T) == 4 ? 1e7 : 1e16) : 0.7) * (i % 2 ? -1 : 1);
      v[i] = static_cast<T>(big * (1 + double(rng() % 1000) / 1000));
    }
    std::vector<const void*> sources;
    for (auto& x : v) sources.push_back(&x);
    T all{};
    foldTree(dtype, sources.data(), V, 0, 1, Reduction::Sum, 1, &all);
    size_t size = 1;
    while (size < v.size()) size *= 2;
    EXPECT_EQ(all, treeNode(v, 0, int64_t(size))) << "V = " << V;
    T left = v[0];
    for (int i = 1; i < V; ++i) left = foldCombine(left, v[i], Reduction::Sum);
    orderSensitive += left != all;
    for (int blocks = 1; blocks <= V; ++blocks)
      if (V % blocks == 0) {  // even blocks: P x K x A = V in any grouping
        std::vector<int64_t> cuts;
        for (int b = 0; b <= blocks; ++b) cuts.push_back(int64_t(b) * (V / blocks));
        EXPECT_EQ(foldInBlocks(v, cuts, dtype), all) << "V = " << V << " in " << blocks << " blocks";
      }
    for (int c = 1; c < V; ++c)  // uneven: two blocks cut anywhere
      EXPECT_EQ(foldInBlocks(v, {0, c, V}, dtype), all) << "V = " << V << " cut at " << c;
  }
  EXPECT_GE(orderSensitive, 3) << "the values should make a left fold differ from the tree";
}

TEST(FoldTreeTest, AnySplitIntoBlocksGivesTheRootsBitsF64) { checkEverySplit<double>(DType::f64); }
TEST(FoldTreeTest, AnySplitIntoBlocksGivesTheRootsBitsF32) { checkEverySplit<float>(DType::f32); }

TEST(FoldTreeTest, IntegerSumsWrapLikeTwosComplement) {
  std::vector<int32_t> v = {INT32_MAX, 1, INT32_MIN, -1, 7};
  std::vector<const void*> sources;
  for (auto& x : v) sources.push_back(&x);
  int32_t out = 0;
  foldTree(DType::i32, sources.data(), 5, 0, 1, Reduction::Sum, 1, &out);
  EXPECT_EQ(out, int32_t(uint32_t(INT32_MAX) + 1u + uint32_t(INT32_MIN) - 1u + 7u));
}

TEST(FoldTreeTest, SourcesThatAreNotConsecutiveAreRefused) {
  EXPECT_THROW(FoldPlan({{0, 0}, {0, 2}}, true), Error);
  EXPECT_THROW(FoldPlan({{0, 1}}, true), Error);
}

}  // namespace
}  // namespace spmd::runtime
