// The backend conformance suite, written once and instantiated per device list: cpu:1, cpu:4,
// sim:1, sim:4 (the simulated accelerator, which runs the CUDA backend's kernel code on the
// host), and cuda:0, cuda:0*4 where a GPU is visible (they skip, saying why, where none is).
// Each backend must give: every kernel equal to the reference kernels, collectives equal to
// the same sums on the host, a training step equal to the cpu backend's with the same replica
// count, a failing replica's error (named) from the whole group, and device-resident values
// that round-trip through calls bit for bit, without host copies of the state on a device
// whose memory is not the host's.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <set>

#include "KernelCases.h"
#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/exec/DeviceArray.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/MemoryPlan.h"
#include "frontend/models/ResNet.h"

namespace spmd::runtime {
namespace {

using spmd::testing::expectClose;
using spmd::testing::randomArray;

struct Backend {
  std::string spec;
  int replicas;
};
void PrintTo(const Backend& b, std::ostream* os) { *os << b.spec; }

class ConformanceTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    std::string backend = GetParam().spec.substr(0, GetParam().spec.find(':')), why;
    int available = availableDevices(backend, &why);
    if (available == 0) GTEST_SKIP() << GetParam().spec << " is not available here: " << why;
    list_ = parseDeviceList(GetParam().spec);
  }
  DeviceList list_;
};

using spmd::testing::errorOf;

// A case as a one-step Program on `device`, run twice (the second reuses cached state).
std::vector<Array> runOnDevice(const KernelCase& c, std::shared_ptr<Device> device) {
  Program p = oneStepProgram(c, "ConformanceTest");
  Executor executor(p, std::move(device));
  std::vector<Array> inputs = inputsInLayout(c);
  executor.run(inputs);
  std::vector<Array> outputs = executor.run(inputs);
  outputsToPlain(c, outputs);
  return outputs;
}

TEST_P(ConformanceTest, EveryKernelMatchesTheReference) {
  const std::set<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter", "ppermute", "all_to_all", "axis_index"};
  for (int r = 0; r < list_.size(); ++r) {
    std::shared_ptr<Device> device = makeDevice(list_, r);
    std::set<std::string> covered;
    for (DType dtype : {DType::f32, DType::f64})
      for (const KernelCase& c : everyKernelCase(dtype)) {
        SCOPED_TRACE(c.name + " on " + device->name());
        covered.insert(c.op);
        if (!c.readBy(*device)) {
          // A backend refuses a program in another backend's layouts up front (blocked on
          // sim and cuda, channels-last on cpu).
          std::string error = errorOf([&] { runOnDevice(c, device); });
          EXPECT_NE(error.find("does not read: compile the program for this device"), std::string::npos) << error;
          continue;
        }
        if (c.op == "custom_call" && device->name().rfind("cuda", 0) == 0) {  // host kernels only: refused
          const std::string error = errorOf([&] { runOnDevice(c, device); });
          EXPECT_NE(error.find("has a host kernel only; give its registration a CUDA kernel"), std::string::npos) << error;
          continue;
        }
        std::vector<Array> actual = runOnDevice(c, device);
        std::vector<Array> expected = runKernel(referenceKernels(), plainCase(c));
        for (size_t i = 0; i < expected.size(); ++i) {
          bool f64 = expected[i].dtype == DType::f64;
          expectClose(actual[i], expected[i], f64 ? c.f64Tolerance : 1e-4, f64 ? c.f64Tolerance : 1e-5,
                      c.name + " output " + std::to_string(i));
        }
      }
    for (const auto& [op, _] : device->kernels())
      if (!collectives.count(op)) {
        EXPECT_TRUE(covered.count(op)) << "no kernel case for " << op;
      }
  }
}

// The fold tree of runtime/device/Fold.h from its definition: the node over [lo, lo + size)
// (cut at v.size()) adds its halves, or is its left half where the right one is empty.
template <typename T>
T treeSum(const std::vector<T>& v, size_t lo, size_t size) {
  if (size == 1) return v[lo];
  size_t half = size / 2;
  if (lo + half >= v.size()) return treeSum(v, lo, half);
  return treeSum(v, lo, half) + treeSum(v, lo + half, half);
}
template <typename T>
double treeSum(const std::vector<double>& values) {
  std::vector<T> v(values.begin(), values.end());
  size_t size = 1;
  while (size < v.size()) size *= 2;
  return double(treeSum(v, 0, size));
}

// psum/pmean/pmax/pmin, allGather, psumScatter and axisIndex against the host, which sums with
// the fold tree over the replicas in the element type, as every backend's all-reduce does (so
// f32 and f64 match exactly).
TEST_P(ConformanceTest, CollectivesMatchTheHost) {
  const int n = list_.size();
  for (DType dtype : {DType::f32, DType::f64}) {
    SCOPED_TRACE(std::string(dtypeName(dtype)));
    Array x = randomArray(dtype, {n, 5}, 11);
    Array scatter = randomArray(dtype, {n, n, 3}, 12);
    auto f = pmap(
        [](const Tensor& v, const Tensor& s) {
          return std::tuple{psum(v, "i"), pmean(v, "i"), pmax(v, "i"), pmin(v, "i"), allGather(v, "i"),
                            psumScatter(s, "i"), axisIndex("i")};
        },
        {.axisName = "i", .outAxes = {replicated, replicated, replicated, replicated, replicated, 0, 0},
         .devices = list_.spec});
    auto [sum, mean, max, min, gathered, scattered, index] = f(x, scatter);
    Array eSum = Array::zeros(dtype, {5}), eMean = eSum, eMax = eSum, eMin = eSum;
    eMean = Array::zeros(dtype, {5}), eMax = Array::zeros(dtype, {5}), eMin = Array::zeros(dtype, {5});
    auto set = [&](Array& a, int64_t i, double v) {
      if (dtype == DType::f32) a.values<float>()[i] = float(v);
      else a.values<double>()[i] = v;
    };
    for (int64_t i = 0; i < 5; ++i) {
      double hi = -INFINITY, lo = INFINITY;
      std::vector<double> values;
      for (int r = 0; r < n; ++r) {
        double v = spmd::testing::valueAt(x, r * 5 + i);
        values.push_back(v), hi = std::max(hi, v), lo = std::min(lo, v);
      }
      double s = dtype == DType::f32 ? treeSum<float>(values) : treeSum<double>(values);
      double m = dtype == DType::f32 ? double(float(s) / float(n)) : s / n;
      set(eSum, i, s), set(eMean, i, m), set(eMax, i, hi), set(eMin, i, lo);
    }
    Array eScatter = Array::zeros(dtype, {n, 3});
    for (int r = 0; r < n; ++r)
      for (int64_t j = 0; j < 3; ++j) {
        std::vector<double> values;
        for (int q = 0; q < n; ++q) values.push_back(spmd::testing::valueAt(scatter, (q * n + r) * 3 + j));
        set(eScatter, r * 3 + j, dtype == DType::f32 ? treeSum<float>(values) : treeSum<double>(values));
      }
    expectClose(sum.array(), eSum, 0, 0, "psum");
    expectClose(mean.array(), eMean, 0, 0, "pmean");
    expectClose(max.array(), eMax, 0, 0, "pmax");
    expectClose(min.array(), eMin, 0, 0, "pmin");
    expectClose(gathered.array(), x, 0, 0, "allGather");
    expectClose(scattered.array(), eScatter, 0, 0, "psumScatter");
    for (int r = 0; r < n; ++r) EXPECT_EQ(index.array().values<int32_t>()[r], r);
  }
}

// The flagship step (reduced ResNet-18, cross-replica BN, SGD) for three steps in f64, against
// the cpu backend (fused) with the same replica count; the state stays on the devices between
// steps. Run fused and unfused, so the backend's own elementwise kernels carry the step too (on
// cpu:N only unfused: fused is the expected run). f64, since
// backends sum in different orders: in f32 that rounding can flip a ReLU whose input is within
// rounding of zero and move the weights by 1e-4 (SpmdEquivalenceTest.cpp says more); in f64 the
// differences stay at rounding (1e-10 here).
TEST_P(ConformanceTest, TrainingStepMatchesTheCpuBackend) {
  const int n = list_.size();
  auto model = models::resnet18({.width = 2, .bnAxisName = "batch"});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  auto [x32, y] = bench::syntheticBatch(4 * n);
  Tensor x = spmd::testing::convertArray(x32.array(), DType::f64);
  auto toF64 = [](const Tree& t) {
    Tree out;
    for (const auto& [name, v] : t) out.set(name, spmd::testing::convertArray(v.array(), DType::f64));
    return out;
  };
  auto run = [&](const std::string& spec, bool fuse) {
    auto step = pmap(bench::trainStep(*model, sgd), {.inAxes = {replicated, replicated, replicated, split, split},
                                                     .devices = spec, .fuseElementwise = fuse});
    auto [p32, s32] = model->initialize(3);
    Tree params = toF64(p32), state = toF64(s32), opt = sgd.init(params);
    std::vector<double> losses;
    for (int s = 0; s < 3; ++s) {
      auto [p, o, st, loss] = step(params, opt, state, x, y);
      params = p, opt = o, state = st;
      losses.push_back(loss.array().values<double>()[0]);
    }
    return std::pair{params, losses};
  };
  std::string cpu = "cpu:" + std::to_string(n);
  auto [expected, expectedLosses] = run(cpu, true);
  for (bool fuse : {true, false}) {
    // On the cpu backend itself the fused run is the expected one: what is checked there is
    // that its own elementwise kernels (unfused) give the fused kernels' results. Its numerics
    // against outside values: TorchReferenceTest (PyTorch) and SpmdEquivalenceTest (N devices
    // against one).
    if (fuse && list_.spec == cpu) continue;
    SCOPED_TRACE(fuse ? "fused" : "unfused");
    auto [actual, actualLosses] = run(list_.spec, fuse);
    for (int s = 0; s < 3; ++s) EXPECT_NEAR(actualLosses[s], expectedLosses[s], 1e-10) << "step " << s;
    for (const auto& [name, t] : expected)
      expectClose(actual.at(name).array(), t.array(), 1e-10, 1e-10, name + " on " + list_.spec + " vs " + cpu);
  }
}

// A bad label on the last replica stops the whole group with that replica's error, and the
// group runs again afterwards.
TEST_P(ConformanceTest, AFailingReplicaStopsTheGroupWithItsError) {
  const int n = list_.size();
  auto f = pmap([](const Tensor& logits, const Tensor& labels) { return psum(mean(softmaxCrossEntropy(logits, labels), {0}), "i"); },
                {.axisName = "i", .inAxes = {split, split}, .devices = list_.spec});
  Array logits = randomArray(DType::f32, {2 * n, 10}, 5);
  Array labels = Array::zeros(DType::i32, {2 * n});
  for (int64_t i = 0; i < 2 * n; ++i) labels.values<int32_t>()[i] = int32_t(i % 10);
  labels.values<int32_t>()[2 * n - 1] = 10;
  std::string message = errorOf([&] { f(logits, labels).array(); });
  std::string replica = "replica " + std::to_string(n - 1) + " of " + std::to_string(n) + " (" +
                        makeDevice(list_, n - 1)->name();
  EXPECT_NE(message.find(replica), std::string::npos) << message;
  EXPECT_NE(message.find("label 10 at row 1 is out of range [0, 10)"), std::string::npos) << message;
  labels.values<int32_t>()[2 * n - 1] = 3;
  EXPECT_TRUE(std::isfinite(f(logits, labels).array().values<float>()[0]));
}

// Results stay on the devices and go back in without a host round trip; donated inputs give
// their buffers to the results and can no longer be used.
TEST_P(ConformanceTest, DeviceResidentValuesRoundTrip) {
  const int n = list_.size();
  Array x = randomArray(DType::f64, {n, 6}, 21);
  Array w = randomArray(DType::f64, {6}, 22);
  auto f = pmap([](const Tensor& v, const Tensor& s) { return std::tuple{add(mul(v, broadcastTo(s, v.shape())), broadcastTo(s, v.shape())), mul(s, 2.0)}; },
                {.axisName = "i", .inAxes = {0, replicated}, .outAxes = {0, replicated}, .devices = list_.spec,
                 .donateArguments = {1}});
  Tensor v = x, s = w;
  for (int k = 0; k < 3; ++k) std::tie(v, s) = f(v, s);
  EXPECT_TRUE(v.onDevices());
  EXPECT_EQ(v.resident()->layout(), DeviceArray::Layout::Sharded);
  EXPECT_EQ(s.resident()->layout(), DeviceArray::Layout::Replicated);
  // The same three calls on host values (each result read back and passed as a new array).
  Array hv = x, hs = w;
  for (int k = 0; k < 3; ++k) {
    auto [a, b] = f(spmd::testing::cloneArray(hv), spmd::testing::cloneArray(hs));
    hv = spmd::testing::cloneArray(a.array()), hs = spmd::testing::cloneArray(b.array());
  }
  expectClose(v.array(), hv, 0, 0, "sharded result");
  expectClose(s.array(), hs, 0, 0, "replicated result");
  // Donation: the old `s` is gone, its buffers now hold the new one.
  Tensor before = s;
  std::vector<const std::byte*> sBuffers;
  for (int r = 0; r < n; ++r) sBuffers.push_back(s.resident()->buffer(r).get());
  auto [v2, s2] = f(v, s);
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(s2.resident()->buffer(r).get(), sBuffers[r]) << "replica " << r << ": the result is not in s's buffer";
  std::string message = errorOf([&] { before.array(); });
  EXPECT_NE(message.find("was donated to pmap 'main' and can no longer be used"), std::string::npos) << message;
  EXPECT_NE(errorOf([&] { f(v2, before); }).find("was donated"), std::string::npos);
  EXPECT_NO_THROW(s2.array());
}

// A training step whose parameters, momentum and BN statistics are donated: they are updated in
// place (every step's results live in exactly the buffers the previous step's held), on a
// device whose memory is not the host's only the batch is copied in and the loss flags out, and
// the results are the bits of the same steps without donation, the state read back to the host
// after every step.
TEST_P(ConformanceTest, DonatedStateIsUpdatedInPlaceWithTheUndonatedBits) {
  const int n = list_.size();
  auto model = models::resnet18({.width = 2});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  auto [x, y] = bench::syntheticBatch(2 * n);
  auto step = pmap(bench::trainStep(*model, sgd),
                   {.inAxes = {replicated, replicated, replicated, split, split}, .devices = list_.spec,
                    .donateArguments = {0, 1, 2}});
  auto [params, state] = model->initialize(3);
  Tree opt = sgd.init(params);
  std::vector<std::shared_ptr<Device>> devices;
  for (int r = 0; r < n; ++r) devices.push_back(makeDevice(list_, r));  // the group's (shared) devices
  auto totals = [&] {
    Device::Transfers t;
    for (auto& d : devices) {
      auto one = d->transfers();
      t.toDevice += one.toDevice, t.toHost += one.toHost;
      t.bytesToDevice += one.bytesToDevice, t.bytesToHost += one.bytesToHost;
    }
    return t;
  };
  // Donation may pair outputs of equal shape in another order, so buffers compare as a set.
  auto buffersOf = [&](const Tree& p, const Tree& o, const Tree& s) {
    std::multiset<const std::byte*> all;
    for (const Tree* tree : {&p, &o, &s})
      for (const auto& [name, t] : *tree)
        for (int r = 0; r < n; ++r) all.insert(t.resident()->buffer(r).get());
    return all;
  };
  auto [p, o, st, loss] = step(params, opt, state, x, y);  // the first call brings the state over
  const auto buffers = buffersOf(p, o, st);
  // Every replica's every output in a buffer of its own (a multiset's size would only count them).
  EXPECT_EQ(std::set<const std::byte*>(buffers.begin(), buffers.end()).size(),
            size_t(n) * (p.size() + o.size() + st.size()))
      << "two outputs share a buffer";
  const Device::Transfers start = totals();
  const int steps = 3;
  for (int s = 0; s < steps; ++s) {
    std::tie(p, o, st, loss) = step(p, o, st, x, y);
    auto now = buffersOf(p, o, st);
    std::vector<const std::byte*> reused;
    std::set_intersection(now.begin(), now.end(), buffers.begin(), buffers.end(), std::back_inserter(reused));
    EXPECT_EQ(reused.size(), buffers.size()) << "step " << s + 1 << " on " << list_.spec << " wrote "
                                             << buffers.size() - reused.size() << " tensors outside the donated buffers";
    // Each computed there by its step, not copied in after the steps (runtime::inPlaceOutputs).
    EXPECT_EQ(step.lastCall().outputsInPlace, int64_t(buffers.size())) << "step " << s + 1 << " on " << list_.spec;
  }
  const Device::Transfers end = totals();
  if (!devices[0]->hostAccessible()) {
    const int64_t batchBytes = int64_t(x.array().bytes() + y.array().bytes());
    const int64_t paramBytes = p.numElements() * 4;
    EXPECT_EQ(end.bytesToDevice - start.bytesToDevice, steps * batchBytes)
        << "only the batch may be copied in (parameters: " << paramBytes << " bytes)";
    // Out: the data checks' words (8 bytes each, per replica and step): the bad-label flags of
    // the loss and its backward, and with several replicas the collectives' rendezvous.
    const int64_t words = step.lastCall().checkWords;
    EXPECT_EQ(end.bytesToHost - start.bytesToHost, steps * words * 8);
    EXPECT_GE(words, n * (n > 1 ? 3 : 2));
  }
  float residentLoss = loss.array().values<float>()[0];
  // The same four steps without donation, the state read back to the host after every step.
  auto [hp, hs] = model->initialize(3);
  Tree ho = sgd.init(hp);
  auto hostStep = pmap(bench::trainStep(*model, sgd),
                       {.inAxes = {replicated, replicated, replicated, split, split}, .devices = list_.spec});
  Tensor hloss;
  auto toHost = [](const Tree& t) {
    Tree out;
    for (const auto& [name, v] : t) out.set(name, spmd::testing::cloneArray(v.array()));
    return out;
  };
  for (int s = 0; s <= steps; ++s) {
    auto [a, b, c, l] = hostStep(hp, ho, hs, x, y);
    hp = toHost(a), ho = toHost(b), hs = toHost(c), hloss = l;
  }
  EXPECT_EQ(residentLoss, hloss.array().values<float>()[0]);
  for (const auto& [name, t] : hp) expectClose(p.at(name).array(), t.array(), 0, 0, "params." + name);
  for (const auto& [name, t] : ho) expectClose(o.at(name).array(), t.array(), 0, 0, "momentum." + name);
  for (const auto& [name, t] : hs) expectClose(st.at(name).array(), t.array(), 0, 0, "state." + name);
}

// Outputs that pass a donated input through are copied before any output is written into the
// donated buffers: here the second output (2a) goes into b's buffer, and the first returns b.
TEST_P(ConformanceTest, PassThroughOutputsAreCopiedBeforeDonatedBuffersAreOverwritten) {
  auto f = pmap([](const Tensor& a, const Tensor& b) { return std::tuple{b, mul(a, 2.0)}; },
                {.inAxes = {replicated, replicated}, .devices = list_.spec, .donateArguments = {1}});
  auto g = pmap([](const Tensor& a) { return a; }, {.inAxes = {replicated}, .devices = list_.spec});
  Array a = randomArray(DType::f32, {5, 3}, 31), b = randomArray(DType::f32, {5, 3}, 32);
  Tensor residentB = g(b);  // on the devices, so that it can be donated
  const std::byte* bBuffer = residentB.resident()->buffer(0).get();
  auto [first, second] = f(a, residentB);
  EXPECT_EQ(second.resident()->buffer(0).get(), bBuffer) << "2a was not written into b's donated buffer";
  expectClose(first.array(), b, 0, 0, "b passed through");
  Array twice = spmd::testing::cloneArray(a);
  for (float& v : twice.values<float>()) v *= 2;
  expectClose(second.array(), twice, 0, 0, "2a");
}

// The fused kernels' part of in-place donation (runtime::inPlaceOutputs): a fused step whose
// first output (2g) goes into its donor p's buffer while its second reads p (p + 2) reads every
// element of p before writing it, whatever order its body computes them in.
TEST_P(ConformanceTest, AFusedStepReadsADonorsElementsBeforeWritingThem) {
  const int64_t n = 5000;
  Program p;
  p.name = "inPlace";
  for (int i = 0; i < 4; ++i) p.buffers.push_back({DType::f32, {n}, {}});
  p.inputs = {0, 1};
  p.steps.push_back({"fused", {0, 1}, {2, 3},
                     {{"body", std::string("%0 = load 1; %1 = const 2; %2 = mul %0 %1; %3 = load 0; %4 = add %3 %1; yield %2 %4")}},
                     "conformance.cpp:1"});
  p.outputs = {2, 3};
  p.inputPlacements = {{}, {}};
  p.outputPlacements = {{}, {}};
  p.outputDonors = {0, -1};
  ASSERT_EQ(inPlaceOutputs(p), (std::vector<bool>{true, false}));
  std::shared_ptr<Device> device = makeDevice(list_, 0);
  Executor executor(p, device);
  Array pa = randomArray(DType::f32, {n}, 41), ga = randomArray(DType::f32, {n}, 42);
  std::shared_ptr<std::byte> donated = device->allocate(pa.bytes()), grads = device->allocate(ga.bytes());
  for (int call = 0; call < 2; ++call) {  // the second call with the kernel's cached state
    device->copyToDevice(donated.get(), pa.data(), pa.bytes());
    device->copyToDevice(grads.get(), ga.data(), ga.bytes());
    std::vector<Input> in = {{{}, donated}, {{}, grads}};
    Array second = Array::zeros(DType::f32, {n});
    std::vector<Output> out = {{.keep = true, .device = donated}, {.host = second}};
    executor.run(in, out);
    EXPECT_EQ(executor.lastCall().outputsInPlace, 1);
    Array first = Array::zeros(DType::f32, {n});
    device->copyToHost(first.data(), donated.get(), first.bytes());
    device->synchronize();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(first.values<float>()[size_t(i)], ga.values<float>()[size_t(i)] * 2.f) << i << " on " << list_.spec;
      ASSERT_EQ(second.values<float>()[size_t(i)], pa.values<float>()[size_t(i)] + 2.f) << i << " on " << list_.spec;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ConformanceTest,
                         ::testing::Values(Backend{"cpu:1", 1}, Backend{"cpu:4", 4}, Backend{"sim:1", 1},
                                           Backend{"sim:4", 4}, Backend{"cuda:0", 1}, Backend{"cuda:0*4", 4}),
                         [](const auto& info) {
                           std::string name = info.param.spec;
                           std::replace(name.begin(), name.end(), ':', '_');
                           std::replace(name.begin(), name.end(), '*', 'x');
                           return name;
                         });

}  // namespace
}  // namespace spmd::runtime
