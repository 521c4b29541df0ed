// Horizontal fusion (compiler/BatchFused.h): the optimizer's per-parameter updates of the
// ResNet-18 training step become one fused step of one segment per parameter tensor, one kernel
// on the simulator (and a GPU), with the bits of the updates run one by one on every backend;
// steps that may not be batched (another body, a broadcast load, a step reading a run's output)
// stay as they are.
#include <gtest/gtest.h>

#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "compiler/BatchFused.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/ProgramCheck.h"
#include "runtime/sim/SimDevice.h"

namespace spmd::runtime {
namespace {

// `program` with every step of several segments split back into one step per segment, in place.
Program unbatched(Program program) {
  std::vector<Step> steps;
  for (const Step& s : program.steps) {
    if (!s.attrs.count("segments")) {
      steps.push_back(s);
      continue;
    }
    const size_t k = size_t(s.integer("segments")), ni = s.inputs.size() / k, no = s.outputs.size() / k;
    for (size_t g = 0; g < k; ++g) {
      Step one = s;
      one.attrs.erase("segments");
      one.inputs.assign(s.inputs.begin() + long(g * ni), s.inputs.begin() + long((g + 1) * ni));
      one.outputs.assign(s.outputs.begin() + long(g * no), s.outputs.begin() + long((g + 1) * no));
      steps.push_back(one);
    }
  }
  program.steps = std::move(steps);
  return program;
}

struct TrainStepCase {
  Program program;
  std::vector<Array> inputs;
  size_t parameters = 0;
};

TrainStepCase resnetTrainStep(const std::string& devices) {
  auto model = models::resnet18({.width = 2});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4});
  auto [params, state] = model->initialize(3);
  Tree opt = sgd.init(params);
  auto [x, y] = bench::syntheticBatch(4);
  auto step = jit(bench::trainStep(*model, sgd), {.devices = devices});
  step(params, opt, state, x, y);
  TrainStepCase c{step.lastProgram(), {}, params.size()};
  for (const Tree* tree : {&params, &opt, &state})
    for (const auto& [name, t] : *tree) c.inputs.push_back(t.array());
  c.inputs.push_back(x.array());
  c.inputs.push_back(y.array());
  return c;
}

TEST(BatchFusedTest, TheOptimizerUpdateIsOneKernel) {
  TrainStepCase c = resnetTrainStep("sim");
  std::vector<const Step*> segmented;
  for (const Step& s : c.program.steps)
    if (s.attrs.count("segments")) segmented.push_back(&s);
  ASSERT_EQ(segmented.size(), 1u) << c.program.toText();
  EXPECT_EQ(size_t(segmented[0]->integer("segments")), c.parameters) << "one segment per parameter tensor";
  // No update is left outside it: no other fused step runs its body.
  for (const Step& s : c.program.steps)
    if (s.op == "fused" && &s != segmented[0]) {
      EXPECT_NE(s.text("body"), segmented[0]->text("body"));
    }
  // And it is one launch: the step queues one work item on the simulator.
  std::shared_ptr<Device> device = makeDevice(parseDeviceList("sim"), 0);
  Program one;
  one.name = "update";
  one.buffers = c.program.buffers;
  for (BufferDesc& b : one.buffers) b.offset = -1, b.constant.clear();
  one.steps = {*segmented[0]};
  for (int id : segmented[0]->inputs) one.inputs.push_back(id);
  for (int id : segmented[0]->outputs) one.outputs.push_back(id);
  std::sort(one.inputs.begin(), one.inputs.end());
  one.inputs.erase(std::unique(one.inputs.begin(), one.inputs.end()), one.inputs.end());
  std::vector<bool> used(one.buffers.size());
  for (int id : one.inputs) used[size_t(id)] = true;
  for (int id : one.outputs) used[size_t(id)] = true;
  Executor executor(one, device);
  std::vector<Array> in;
  for (int id : one.inputs)
    in.push_back(spmd::testing::randomArray(one.buffers[size_t(id)].dtype, one.buffers[size_t(id)].shape, uint64_t(id)));
  executor.run(in);
  const int64_t before = static_cast<const SimDevice&>(*device).queued();
  executor.run(in);
  const int64_t queued = static_cast<const SimDevice&>(*device).queued() - before;
  EXPECT_EQ(queued - int64_t(in.size()), 1) << "the input copies, then one kernel for every parameter's update";
}

TEST(BatchFusedTest, TheBatchedUpdateGivesTheBitsOfTheUpdatesRunOneByOne) {
  for (const char* devices : {"sim", "cpu"}) {
    SCOPED_TRACE(devices);
    TrainStepCase c = resnetTrainStep(devices);
    const Program split = unbatched(c.program);
    ASSERT_GT(split.steps.size(), c.program.steps.size());
    std::shared_ptr<Device> device = makeDevice(parseDeviceList(devices), 0);
    Executor batched(c.program, device), oneByOne(split, device);
    std::vector<Array> a = batched.run(c.inputs), b = oneByOne.run(c.inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) spmd::testing::expectClose(a[o], b[o], 0, 0, "output " + std::to_string(o));
  }
}

// Hand-made Programs: which runs merge.
TEST(BatchFusedTest, OnlyIndependentAdjacentStepsWithOneDirectBodyMerge) {
  const std::string update = "%0 = load 0; %1 = load 1; %2 = add %0 %1; yield %2";
  const std::string other = "%0 = load 0; %1 = load 1; %2 = mul %0 %1; yield %2";
  const std::string broadcast = "%0 = load 0; %1 = load 1 dims [1]; %2 = add %0 %1; yield %2";
  Program p;
  for (Shape s : {Shape{4}, Shape{4}, Shape{4}, Shape{3}, Shape{3}, Shape{3}, Shape{2, 3}, Shape{2, 3}, Shape{4}, Shape{3},
                  Shape{2, 3}, Shape{4}})
    p.buffers.push_back({DType::f32, s, {}});
  auto fused = [](std::string body, std::vector<int> in, int out) {
    return Step{"fused", std::move(in), {out}, {{"body", std::move(body)}}, "t.cpp:1"};
  };
  p.steps = {fused(update, {0, 1}, 2),   // merges with the next two
             fused(update, {3, 4}, 5),   //
             fused(update, {6, 7}, 10),  //
             fused(update, {2, 0}, 8),   // reads the run's output: starts a new run
             fused(other, {3, 4}, 9),    // another body
             fused(broadcast, {6, 4}, 11)};  // a broadcast load: never batched
  EXPECT_EQ(spmd::batchFusedSteps(p), 2);
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.steps[0].integer("segments"), 3);
  EXPECT_EQ(p.steps[0].inputs, (std::vector<int>{0, 1, 3, 4, 6, 7}));
  EXPECT_EQ(p.steps[0].outputs, (std::vector<int>{2, 5, 10}));
  for (size_t s = 1; s < 4; ++s) EXPECT_FALSE(p.steps[s].attrs.count("segments")) << s;
  EXPECT_EQ(p.steps[1].outputs, std::vector<int>{8});
  // A Program from elsewhere (a file, a hand) whose segments do not split its operands: refused.
  p.name = "p";
  p.inputs = {0, 1, 3, 4, 6, 7};
  p.steps.resize(1);
  checkProgram(p);
  p.steps[0].attrs["segments"] = int64_t(4);
  EXPECT_NE(spmd::testing::errorOf([&] { checkProgram(p); }).find("4 segments do not split its 6 inputs and 3 outputs evenly"),
            std::string::npos);
}

}  // namespace
}  // namespace spmd::runtime
