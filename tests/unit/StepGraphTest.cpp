// Steps replayed as graphs (runtime/exec/StepGraph.h) on the simulator, which captures by the
// rules a CUDA stream has (and on a GPU when there is one): the ResNet-18 training step replays as
// one graph per step with no host wait inside (its label checks are read at the step's end) and
// gives the bits of the step run kernel by kernel for 5 steps, each replay queues exactly the work
// the unrecorded step queues, a bad label after replay gives the eager step's error, two replicas
// of one process meet on the devices and stay one graph each, a step that needs the host (their
// collectives meeting on the host instead) splits the graph, and the modes that need
// the steps one by one (the debug mode, SPMD_CUDA_GRAPHS=0) turn graphs off, saying why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/InProcessCommunicator.h"
#include "runtime/exec/Executor.h"
#include "runtime/sim/SimDevice.h"

namespace spmd::runtime {
namespace {

struct GraphsSwitch {
  explicit GraphsSwitch(const char* value) { setenv("SPMD_CUDA_GRAPHS", value, 1); }
  ~GraphsSwitch() { unsetenv("SPMD_CUDA_GRAPHS"); }
};

// The ResNet-18 training step (width 2, batch 4, f64) as a Program and its first inputs; with
// `replicas`, compiled by pmap over that many devices (each replica's program and inputs, local
// batch 4), so its gradients go through an all-reduce.
std::pair<Program, std::vector<Array>> trainStepProgram(int replicas = 0) {
  auto model = models::resnet18({.width = 2});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  auto [params32, state32] = model->initialize(3);
  auto toF64 = [](const Tree& t) {
    Tree out;
    for (const auto& [name, v] : t) out.set(name, spmd::testing::convertArray(v.array(), DType::f64));
    return out;
  };
  Tree params = toF64(params32), state = toF64(state32), opt = sgd.init(params);
  auto [x32, y] = bench::syntheticBatch(4);
  Tensor x = spmd::testing::convertArray(x32.array(), DType::f64);
  Program program;
  if (replicas > 0) {
    auto [xs, ys] = bench::syntheticBatch(4 * replicas);
    auto step = pmap(bench::trainStep(*model, sgd), {.inAxes = {replicated, replicated, replicated, split, split},
                                                      .devices = "sim:" + std::to_string(replicas)});
    step(params, opt, state, Tensor(spmd::testing::convertArray(xs.array(), DType::f64)), ys);
    program = step.lastProgram();
  } else {
    auto step = jit(bench::trainStep(*model, sgd));
    step(params, opt, state, x, y);
    program = step.lastProgram();
  }
  std::vector<Array> inputs;
  for (const Tree* tree : {&params, &opt, &state})
    for (const auto& [name, t] : *tree) inputs.push_back(t.array());
  inputs.push_back(x.array());
  inputs.push_back(y.array());
  return {program, inputs};
}

bool hasOp(const Program& program, const std::string& op) {
  for (const Step& step : program.steps)
    if (step.op == op) return true;
  return false;
}

// An executor of `program` on `device` with graphs off (SPMD_CUDA_GRAPHS=0 while it is made).
std::unique_ptr<Executor> eagerExecutor(const Program& program, std::shared_ptr<Device> device) {
  GraphsSwitch off("0");
  return std::make_unique<Executor>(program, std::move(device));
}

// Runs `steps` calls, feeding the outputs before the loss back as the next inputs unless
// `sameInputs`; returns every call's outputs and, on sim, the work each call queued.
std::pair<std::vector<std::vector<Array>>, std::vector<int64_t>> run(Executor& executor, std::vector<Array> inputs,
                                                                     int steps, bool sameInputs = false) {
  const bool onSim = executor.device().name().rfind("sim:", 0) == 0;
  auto* sim = onSim ? static_cast<const SimDevice*>(&executor.device()) : nullptr;
  std::vector<std::vector<Array>> outputs;
  std::vector<int64_t> queued;
  for (int s = 0; s < steps; ++s) {
    const int64_t before = sim ? sim->queued() : 0;
    outputs.push_back(executor.run(inputs));
    queued.push_back(sim ? sim->queued() - before : 0);
    if (!sameInputs)
      for (size_t i = 0; i + 2 < inputs.size(); ++i) inputs[i] = outputs.back()[i];
  }
  return {outputs, queued};
}

std::vector<std::string> splitOps(const Program& program, const StepGraph& graph) {
  std::vector<std::string> ops;
  for (size_t s : graph.splitters()) ops.push_back(program.steps[s].op);
  return ops;
}

TEST(StepGraphTest, TheTrainingStepReplayedFromItsGraphsGivesTheUnrecordedBits) {
  auto [program, inputs] = trainStepProgram();
  ASSERT_EQ(program.outputs.size() + 1, inputs.size()) << "outputs: params, momentum, BN state, loss";
  std::shared_ptr<Device> device = makeDevice(parseDeviceList("sim"), 0);
  Executor graphed(program, device);
  std::unique_ptr<Executor> eager = eagerExecutor(program, device);
  auto [withGraphs, queuedWith] = run(graphed, inputs, 5);
  auto [without, queuedWithout] = run(*eager, inputs, 5);
  for (int s = 0; s < 5; ++s)
    for (size_t o = 0; o < without[s].size(); ++o)
      spmd::testing::expectClose(withGraphs[s][o], without[s][o], 0, 0,
                                 "step " + std::to_string(s) + " output " + std::to_string(o));
  EXPECT_NE(withGraphs[4].back().values<double>()[0], withGraphs[0].back().values<double>()[0]) << "the loss moves";

  ASSERT_NE(graphed.stepGraph(), nullptr) << graphed.graphsOff();
  EXPECT_EQ(eager->stepGraph(), nullptr);
  const StepGraph& graph = *graphed.stepGraph();
  // Recorded on the second call, replayed from the third: each replay queues what a call
  // without graphs queues, all of it from the one graph.
  for (int s = 2; s < 5; ++s) EXPECT_EQ(queuedWith[s], queuedWithout[s]) << "call " << s;
  // Without the input copies, and the copies that gather the data checks' words after the steps.
  const int64_t checkWords = eager->lastCall().checkWords;
  EXPECT_EQ(checkWords, 2) << "the loss's label checks, forward and backward";
  const int64_t work = queuedWithout[4] - int64_t(inputs.size()) - checkWords;
  std::printf("  %zu graph of %zu launches; the step queues %lld work items\n", graph.graphs(), graph.launches(),
              (long long)work);
  ASSERT_TRUE(hasOp(program, "softmax_cross_entropy")) << "the step checks its labels";
  EXPECT_EQ(splitOps(program, graph), std::vector<std::string>{}) << "the label checks no longer wait on the host";
  EXPECT_EQ(graph.graphs(), 1u);
  EXPECT_EQ(int64_t(graph.launches()), work) << "the graph holds every kernel of the step";
  // The executor's counters: a replay launches one graph, calls no kernel, never waits inside
  // the step; without graphs every kernel is called, still without a wait.
  EXPECT_EQ(graphed.lastCall().graphLaunches, 1);
  EXPECT_EQ(graphed.lastCall().stepsCalled, 0);
  EXPECT_EQ(graphed.lastCall().hostWaitsInSteps, 0);
  EXPECT_EQ(eager->lastCall().graphLaunches, 0);
  EXPECT_EQ(eager->lastCall().stepsCalled, int64_t(program.steps.size()));
  EXPECT_EQ(eager->lastCall().hostWaitsInSteps, 0);
}

// A label out of range, met by a replayed graph: the same error as the step run kernel by kernel
// (naming the step, its line and the device, and the first bad label), read at the step's end;
// the executor then runs good steps again with the unrecorded bits.
TEST(StepGraphTest, ABadLabelAfterReplayGivesTheEagerStepsError) {
  auto [program, inputs] = trainStepProgram();
  std::shared_ptr<Device> device = makeDevice(parseDeviceList("sim"), 0);
  Executor graphed(program, device);
  std::unique_ptr<Executor> eager = eagerExecutor(program, device);
  for (int call = 0; call < 3; ++call) graphed.run(inputs);
  ASSERT_NE(graphed.stepGraph(), nullptr) << graphed.graphsOff();
  ASSERT_EQ(graphed.lastCall().graphLaunches, 1) << "replaying";
  std::vector<Array> bad = inputs;
  bad.back() = spmd::testing::cloneArray(inputs.back());
  bad.back().values<int32_t>()[1] = 10;
  bad.back().values<int32_t>()[3] = -2;
  std::string fromGraph = spmd::testing::errorOf([&] { graphed.run(bad); });
  std::string fromEager = spmd::testing::errorOf([&] { eager->run(bad); });
  EXPECT_EQ(fromGraph, fromEager);
  EXPECT_NE(fromGraph.find("'softmax_cross_entropy' ("), std::string::npos) << fromGraph;
  EXPECT_NE(fromGraph.find(") failed on sim:0: label 10 at row 1 is out of range [0, 10)"), std::string::npos)
      << fromGraph;
  EXPECT_EQ(graphed.lastCall().graphLaunches, 1) << "the bad call replayed the graph";
  auto again = graphed.run(inputs);
  auto expected = eagerExecutor(program, device)->run(inputs);
  EXPECT_EQ(graphed.lastCall().graphLaunches, 1);
  for (size_t o = 0; o < expected.size(); ++o)
    spmd::testing::expectClose(again[o], expected[o], 0, 0, "output " + std::to_string(o) + " after the error");
}

// A call that fails after its step ran (a bad label, read at the step's end) may have updated its
// donated state in place already, so, as JAX consumes donated buffers, the donated values are
// gone after a failed call too, and using one says why; fresh values run again.
TEST(StepGraphTest, AFailedCallConsumesItsDonatedArgumentsSayingWhy) {
  auto model = models::resnet18({.width = 2});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  auto [params, state] = model->initialize(3);
  Tree opt = sgd.init(params);
  auto [x, y] = bench::syntheticBatch(4);
  auto step = jit(bench::trainStep(*model, sgd), {.devices = "sim", .donateArguments = {0, 1, 2}});
  auto [p1, o1, s1, l1] = step(params, opt, state, x, y);
  ASSERT_TRUE(p1.begin()->second.onDevices());
  Array bad = spmd::testing::cloneArray(y.array());
  bad.values<int32_t>()[2] = 12;
  std::string message = spmd::testing::errorOf([&] { step(p1, o1, s1, x, Tensor(bad)); });
  EXPECT_NE(message.find("label 12 at row 2 is out of range [0, 10)"), std::string::npos) << message;
  message = spmd::testing::errorOf([&] { step(p1, o1, s1, x, y); });
  EXPECT_NE(message.find("can no longer be used; that call failed after it may have written into its buffers: restore "
                         "the value from a checkpoint or compute it again"),
            std::string::npos)
      << message;
  auto [p2, o2, s2, l2] = step(params, opt, state, x, y);  // host values: nothing was donated
  EXPECT_TRUE(std::isfinite(l2.array().values<float>()[0]));
}

// Both replicas of a pmapped training step on sim:2, each on its own thread, for `steps`
// calls: replica 0's outputs of each call (replica 1's asserted bit-equal to them) and the
// executors. `graphs`: graphs on (else every executor is made with SPMD_CUDA_GRAPHS=0).
struct TwoReplicas {
  std::vector<std::vector<Array>> outputs;
  std::vector<std::unique_ptr<Executor>> executors;
};
TwoReplicas runTwoReplicas(const Program& program, const std::vector<Array>& inputs, bool graphs, int steps) {
  const DeviceList list = parseDeviceList("sim:2");
  std::vector<std::shared_ptr<Device>> devices = {makeDevice(list, 0), makeDevice(list, 1)};
  for (auto& d : devices) static_cast<SimDevice&>(*d).refusePartialGraphs(true);
  auto group = std::make_shared<InProcessGroup>(2, std::chrono::milliseconds(30000));
  std::vector<std::unique_ptr<InProcessCommunicator>> comms;
  TwoReplicas result;
  for (int r = 0; r < 2; ++r) {
    comms.push_back(std::make_unique<InProcessCommunicator>(group, r));
    result.executors.push_back(graphs ? std::make_unique<Executor>(program, devices[size_t(r)])
                                      : eagerExecutor(program, devices[size_t(r)]));
    result.executors.back()->setCommunicator(comms.back().get());
  }
  std::vector<Array> in = inputs;
  for (int s = 0; s < steps; ++s) {
    std::vector<Array> other;
    std::thread second([&] { other = result.executors[1]->run(in); });
    result.outputs.push_back(result.executors[0]->run(in));
    second.join();
    for (size_t o = 0; o < other.size(); ++o)
      spmd::testing::expectClose(other[o], result.outputs.back()[o], 0, 0, "replica 1 vs 0, output " + std::to_string(o));
    for (size_t i = 0; i + 2 < in.size(); ++i) in[i] = result.outputs.back()[i];
  }
  for (auto& e : result.executors) e->setCommunicator(nullptr);  // the communicators go with this scope
  return result;
}

void expectSameBits(const std::vector<std::vector<Array>>& a, const std::vector<std::vector<Array>>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t s = 0; s < a.size(); ++s)
    for (size_t o = 0; o < a[s].size(); ++o)
      spmd::testing::expectClose(a[s][o], b[s][o], 0, 0, what + ", step " + std::to_string(s) + " output " + std::to_string(o));
}

// The in-process collectives of replicas on one device kind meet on the devices
// (runtime/kernels/Collectives.h): the pmapped training step of two replicas replays as one graph
// per step on each, with no host wait inside, and gives the bits of the step run kernel by kernel
// and of the collectives meeting on the host (SPMD_DEVICE_RENDEZVOUS=0), which fold alike.
TEST(StepGraphTest, TheStepOfTwoReplicasOnOneProcessIsOneGraphWithoutHostWaits) {
  auto [program, inputs] = trainStepProgram(/*replicas=*/2);
  ASSERT_TRUE(hasOp(program, "all_reduce"));
  TwoReplicas graphed = runTwoReplicas(program, inputs, true, 4);
  TwoReplicas eager = runTwoReplicas(program, inputs, false, 4);
  setDeviceRendezvous(false);
  TwoReplicas onHost = runTwoReplicas(program, inputs, false, 4);
  setDeviceRendezvous(std::nullopt);
  expectSameBits(graphed.outputs, eager.outputs, "graphs vs kernel by kernel");
  expectSameBits(graphed.outputs, onHost.outputs, "meeting on the devices vs on the host");
  for (int r = 0; r < 2; ++r) {
    const Executor& e = *graphed.executors[size_t(r)];
    ASSERT_NE(e.stepGraph(), nullptr) << e.graphsOff();
    EXPECT_EQ(e.stepGraph()->graphs(), 1u);
    EXPECT_TRUE(e.stepGraph()->splitters().empty()) << "no step runs outside the graph";
    EXPECT_EQ(e.lastCall().graphLaunches, 1);
    EXPECT_EQ(e.lastCall().stepsCalled, 0);
    EXPECT_EQ(e.lastCall().hostWaitsInSteps, 0);
  }
  EXPECT_GT(onHost.executors[0]->lastCall().hostWaitsInSteps, 0) << "the host rendezvous waits for the device";
}

// A step the graph cannot hold because it waits on the host (the collectives meeting on the host,
// SPMD_DEVICE_RENDEZVOUS=0), or allocates during capture (on CUDA, one holding memory allocation
// nodes): the steps recorded since the last graph run outside one at a time, with the same bits,
// and the part after the last split is a graph.
TEST(StepGraphTest, StepsAGraphCannotKeepRunOutsideWithTheSameBits) {
  auto [program, inputs] = trainStepProgram(/*replicas=*/2);
  setDeviceRendezvous(false);
  TwoReplicas graphed = runTwoReplicas(program, inputs, true, 4);
  TwoReplicas eager = runTwoReplicas(program, inputs, false, 4);
  setDeviceRendezvous(std::nullopt);
  expectSameBits(graphed.outputs, eager.outputs, "graphs vs kernel by kernel");
  ASSERT_NE(graphed.executors[0]->stepGraph(), nullptr) << graphed.executors[0]->graphsOff();
  const StepGraph& graph = *graphed.executors[0]->stepGraph();
  EXPECT_EQ(graph.graphs(), 1u);
  // Every step up to the last all-reduce ran outside; the graph holds the rest.
  std::vector<std::string> split = splitOps(program, graph);
  ASSERT_FALSE(split.empty());
  EXPECT_EQ(split.back(), "all_reduce");
  EXPECT_EQ(graph.splitters().back() + 1, graph.splitters().size()) << "the steps outside are 0, 1, 2, ...";
  EXPECT_EQ(graphed.executors[0]->lastCall().stepsCalled, int64_t(split.size()));
  EXPECT_GT(graphed.executors[0]->lastCall().hostWaitsInSteps, 0) << "the all-reduce's rendezvous waits for the device";
}

// A pmapped step over one device: its all-reduce of one replica needs no rendezvous, so the step
// is one graph with no host wait, as jit's is.
TEST(StepGraphTest, APmappedStepOnOneDeviceIsOneGraph) {
  auto [program, inputs] = trainStepProgram(/*replicas=*/1);
  ASSERT_TRUE(hasOp(program, "all_reduce"));
  InProcessCommunicator comm(std::make_shared<InProcessGroup>(1, std::chrono::milliseconds(30000)), 0);
  Executor executor(program, makeDevice(parseDeviceList("sim"), 0));
  executor.setCommunicator(&comm);
  run(executor, inputs, 3);
  ASSERT_NE(executor.stepGraph(), nullptr) << executor.graphsOff();
  EXPECT_EQ(executor.stepGraph()->graphs(), 1u);
  EXPECT_TRUE(executor.stepGraph()->splitters().empty());
  EXPECT_EQ(executor.lastCall().graphLaunches, 1);
  EXPECT_EQ(executor.lastCall().hostWaitsInSteps, 0);
}

// The same on a GPU, captured into CUDA graphs (runtime/cuda/Capture.cpp); skipped without one.
// cuDNN's algorithms are chosen by its heuristic, not by timing, so two executors of one step
// run the same kernels: the graphed run is held to the eager one, and to its own first,
// unrecorded call on the same inputs, bit for bit.
TEST(StepGraphTest, OnAGpuTheStepCapturedIntoCudaGraphsReplaysTheUnrecordedBits) {
  std::string why;
  if (availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU to capture CUDA graphs on: " << why;
  auto [program, inputs] = trainStepProgram();
  std::shared_ptr<Device> device = makeDevice(parseDeviceList("cuda:0"), 0);
  Executor graphed(program, device);
  std::unique_ptr<Executor> eager = eagerExecutor(program, device);
  auto same = run(graphed, inputs, 4, /*sameInputs=*/true).first;
  for (int s = 1; s < 4; ++s)
    for (size_t o = 0; o < same[0].size(); ++o)
      spmd::testing::expectClose(same[s][o], same[0][o], 0, 0,
                                 "call " + std::to_string(s) + " output " + std::to_string(o) + " vs call 0");
  ASSERT_NE(graphed.stepGraph(), nullptr) << graphed.graphsOff();
  EXPECT_EQ(splitOps(program, *graphed.stepGraph()), std::vector<std::string>{});
  EXPECT_EQ(graphed.stepGraph()->graphs(), 1u);
  EXPECT_EQ(graphed.lastCall().hostWaitsInSteps, 0);
  auto withGraphs = run(graphed, inputs, 5).first;
  auto without = run(*eager, inputs, 5).first;
  for (int s = 0; s < 5; ++s)
    for (size_t o = 0; o < without[s].size(); ++o)
      spmd::testing::expectClose(withGraphs[s][o], without[s][o], 0, 0,
                                 "step " + std::to_string(s) + " output " + std::to_string(o));
}

TEST(StepGraphTest, AStepWithoutHostWorkIsOneGraphOfEveryKernel) {
  auto f = jit([](const Tensor& x, const Tensor& w) { return sum(tanh(matmul(x, w)) * 2.0 + 1.0, {0, 1}); },
               {.devices = "sim"});
  Array x = spmd::testing::randomArray(DType::f32, {4, 3}, 1), w = spmd::testing::randomArray(DType::f32, {3, 5}, 2);
  const float expected = f(x, w).array().values<float>()[0];
  Executor executor(f.lastProgram(), makeDevice(parseDeviceList("sim"), 0));
  std::vector<Array> in = {x, w};
  auto& sim = static_cast<const SimDevice&>(executor.device());
  int64_t eagerWork = 0;
  for (int call = 0; call < 3; ++call) {
    const int64_t before = sim.queued();
    Array y = executor.run(in)[0];
    if (call == 0) eagerWork = sim.queued() - before - 2;  // the two input copies
    EXPECT_EQ(y.values<float>()[0], expected) << "call " << call;
  }
  ASSERT_NE(executor.stepGraph(), nullptr) << executor.graphsOff();
  EXPECT_EQ(executor.stepGraph()->graphs(), 1u);
  EXPECT_TRUE(executor.stepGraph()->splitters().empty());
  EXPECT_EQ(int64_t(executor.stepGraph()->launches()), eagerWork) << "the graph holds every kernel of the program";
}

TEST(StepGraphTest, TheDebugModeTurnsGraphsOffSayingWhy) {
  auto f = jit([](const Tensor& x) { return exp(x) + 1.0; }, {.devices = "sim"});
  Array x = spmd::testing::randomArray(DType::f32, {8}, 3);
  f(x);
  Executor executor(f.lastProgram(), makeDevice(parseDeviceList("sim"), 0));
  executor.enableDebugNonFinite(true, false);
  for (int call = 0; call < 3; ++call) executor.run(std::vector<Array>{x});
  EXPECT_EQ(executor.stepGraph(), nullptr);
  EXPECT_EQ(executor.graphsOff(), "the debug mode checks every step's outputs on the host");
}

// Inputs bound in place from buffers that are new every call: recorded again once, then off.
TEST(StepGraphTest, BuffersThatMoveEveryCallTurnGraphsOffSayingWhy) {
  auto f = jit([](const Tensor& x) { return exp(x) + 1.0; }, {.devices = "sim"});
  Array x = spmd::testing::randomArray(DType::f32, {8}, 4);
  const Array expected = f(x).array();
  std::shared_ptr<Device> device = makeDevice(parseDeviceList("sim"), 0);
  Executor executor(f.lastProgram(), device);
  std::vector<std::shared_ptr<std::byte>> kept;  // alive, so no address comes back
  for (int call = 0; call < 5; ++call) {
    kept.push_back(device->allocate(x.bytes()));
    device->copyToDevice(kept.back().get(), static_cast<const std::byte*>(x.data()), x.bytes());
    std::vector<Input> in{{Array{}, kept.back()}};
    std::vector<Output> out{{Array::zeros(DType::f32, {8})}};
    executor.run(in, out);
    spmd::testing::expectClose(out[0].host, expected, 0, 0, "call " + std::to_string(call));
  }
  EXPECT_EQ(executor.stepGraph(), nullptr);
  EXPECT_EQ(executor.graphsOff(), "its buffers moved between calls again (inputs that are not donated move every call)");
}

}  // namespace
}  // namespace spmd::runtime
