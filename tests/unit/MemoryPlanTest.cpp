// The liveness-based memory plan: placement on a hand-made Program, the runtime's check against
// unsafe plans (a Program may come from a file), reshapes placed on their inputs' bytes, and
// ResNet-18 and transformer training steps whose results are bit-identical with and without the
// plan while its memory shrinks.

#include <algorithm>
#include <cstring>

#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "compiler/PlanMemory.h"
#include "frontend/spmd.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/MemoryPlan.h"
#include "runtime/cpu/CpuDevice.h"
#include "frontend/models/ResNet.h"
#include "frontend/models/Transformer.h"

namespace spmd {
namespace {

using runtime::Program;

// x -> a -> b -> c -> d (each relu of the last): a and c can share memory, b and d too.
Program chain(int64_t n) {
  Program p;
  p.name = "chain";
  for (int i = 0; i < 5; ++i) p.buffers.push_back({DType::f32, {n}, {}});
  p.inputs = {0};
  for (int i = 0; i < 4; ++i) p.steps.push_back({"relu", {i}, {i + 1}, {}, "chain.cpp:" + std::to_string(i)});
  p.outputs = {4};
  return p;
}

TEST(MemoryPlanTest, ChainReusesMemoryOfDeadBuffers) {
  Program p = chain(1000);  // 4000 bytes, 4096 aligned
  planMemory(p);
  EXPECT_EQ(p.buffers[0].offset, -1) << "inputs are bound by the caller, not planned";
  // By hand: at most two of the chain's buffers live at once, each 4000 bytes in a 4096 slot.
  EXPECT_EQ(p.arenaBytes, 2u * 4096) << p.toText();
  EXPECT_NE(p.buffers[1].offset, p.buffers[2].offset);
  EXPECT_EQ(p.buffers[1].offset, p.buffers[3].offset);
  EXPECT_EQ(p.buffers[2].offset, p.buffers[4].offset);
  EXPECT_NE(p.toText().find("arena 8192 bytes"), std::string::npos) << p.toText();

  auto lives = runtime::lifetimes(p);
  EXPECT_EQ(lives[1].first, 0);
  EXPECT_EQ(lives[1].last, 1);
  EXPECT_EQ(lives[4].last, 4) << "outputs live to the end";
}

TEST(MemoryPlanTest, RuntimeRejectsUnsafePlans) {
  auto message = [](const Program& p) {
    try {
      runtime::checkMemoryPlan(p);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Program p = chain(1000);
  planMemory(p);
  EXPECT_EQ(message(p), "no error");

  Program overlap = p;
  overlap.buffers[2].offset = overlap.buffers[1].offset;  // b written while a is read
  EXPECT_NE(message(overlap).find("memory plan puts buffer %"), std::string::npos) << message(overlap);
  EXPECT_NE(message(overlap).find("while both are live (steps"), std::string::npos);

  Program outside = p;
  outside.arenaBytes = 4096;
  EXPECT_NE(message(outside).find("outside the 4096-byte arena"), std::string::npos) << message(outside);

  Program misaligned = p;
  misaligned.buffers[3].offset += 4;
  EXPECT_NE(message(misaligned).find("misaligned"), std::string::npos);

  Program input = p;
  input.buffers[0].offset = 0;
  EXPECT_NE(message(input).find("is an input or constant"), std::string::npos);

  // The executor refuses such a program before running anything.
  EXPECT_THROW(runtime::Executor(overlap, std::make_shared<runtime::CpuDevice>()), Error);
}

// x -> a = relu(x) -> b = reshape(a) -> c = relu(b): b lies on a's bytes and its reshape copies
// nothing; the results are still relu(relu(x)). Not where a is written twice (an accumulator) or
// is in a blocked layout: there b gets its own bytes, and the check refuses it on a's.
TEST(MemoryPlanTest, AReshapeLiesOnItsInputsBytes) {
  auto program = [] {
    Program p;
    p.name = "reshaped";
    p.buffers = {{DType::f32, {6}, {}}, {DType::f32, {6}, {}}, {DType::f32, {2, 3}, {}}, {DType::f32, {2, 3}, {}}};
    p.inputs = {0};
    p.steps.push_back({"relu", {0}, {1}, {}, "r.cpp:1"});
    p.steps.push_back({"reshape", {1}, {2}, {}, "r.cpp:2"});
    p.steps.push_back({"relu", {2}, {3}, {}, "r.cpp:3"});
    p.outputs = {3};
    return p;
  };
  Program p = program();
  planMemory(p);
  EXPECT_EQ(p.buffers[1].offset, p.buffers[2].offset) << p.toText();
  EXPECT_NE(p.buffers[3].offset, p.buffers[2].offset) << "c is written while b is read";
  Array x = Array::of<float>({6}, std::vector<float>{-1, 2, -3, 4, 5, -6});
  Array y = runtime::Executor(p, std::make_shared<runtime::CpuDevice>()).run(std::vector<Array>{x})[0];
  EXPECT_EQ(y.shape, (Shape{2, 3}));
  const std::span<const float> got = y.values<float>();
  EXPECT_EQ(std::vector<float>(got.begin(), got.end()), (std::vector<float>{0, 2, 0, 4, 5, 0}));

  // The memory budget's error counts the chain once: its fullest step is c's, x + a/b + c.
  const runtime::PeakLive peak = runtime::peakLive(p);
  EXPECT_EQ(peak.step, 2);
  EXPECT_EQ(peak.bytes, 3u * 24);
  std::vector<int> live = peak.buffers;
  std::sort(live.begin(), live.end());
  EXPECT_EQ(live, (std::vector<int>{0, 1, 3}));

  Program twice = program();  // a written again by a later step (as accumulators are)
  twice.steps.insert(twice.steps.begin() + 1, {"relu", {0}, {1}, {}, "r.cpp:1"});
  Program blocked = program();
  blocked.buffers[1].layout = "nChw8c";
  for (Program* q : {&twice, &blocked}) {
    EXPECT_EQ(runtime::reshapeRoots(*q)[2], 2);
    planMemory(*q);
    EXPECT_NE(q->buffers[1].offset, q->buffers[2].offset) << q->toText();
    q->buffers[2].offset = q->buffers[1].offset;
    EXPECT_THROW(runtime::checkMemoryPlan(*q), Error);
  }
}

// An SGD update p - 0.5 g in one fused step, p donated to the result (Program::outputDonors).
Program update(int64_t n) {
  Program p;
  p.name = "update";
  for (int i = 0; i < 3; ++i) p.buffers.push_back({DType::f32, {n}, {}});
  p.inputs = {0, 1};
  p.steps.push_back({"fused", {0, 1}, {2}, {{"body", std::string("%0 = load 0; %1 = load 1; %2 = const 0.5; %3 = mul %1 %2; %4 = sub %0 %3; yield %4")}}, "u.cpp:1"});
  p.outputs = {2};
  p.inputPlacements = {{}, {}};
  p.outputPlacements = {{}};
  p.outputDonors = {0};
  return p;
}

// jax's input_output_aliases: an output whose donor nothing reads after the output's step (or
// that step, when it is fused and reads each element before writing it) is computed in the
// donor's buffers: the plan gives it no bytes, the executor no copy; where a later step reads the
// donor, the donor is returned, another step kind reads it while writing, or another segment of
// the step reads it, the output keeps bytes of its own.
TEST(MemoryPlanTest, AnOutputIsComputedInItsDonorsBufferWhereNothingReadsTheDonorLater) {
  const int64_t n = 1000;
  Program p = update(n);
  EXPECT_EQ(runtime::inPlaceOutputs(p), std::vector<bool>{true});
  planMemory(p);
  EXPECT_EQ(p.buffers[2].offset, -1) << p.toText();
  EXPECT_EQ(p.arenaBytes, 0u);
  EXPECT_EQ(runtime::residentBytes(p, false), 2u * n * 4) << "p and g; the result is p's bytes";
  EXPECT_EQ(runtime::peakLive(p).bytes, 2u * n * 4);

  auto cpu = std::make_shared<runtime::CpuDevice>();
  runtime::Executor exec(p, cpu);
  std::vector<float> pv(n), gv(n);
  for (int64_t i = 0; i < n; ++i) pv[size_t(i)] = 0.25f * float(i % 17) - 1.5f, gv[size_t(i)] = float(i % 5) - 2.f;
  auto donated = cpu->allocate(n * 4), grads = cpu->allocate(n * 4);
  std::memcpy(donated.get(), pv.data(), n * 4);
  std::memcpy(grads.get(), gv.data(), n * 4);
  std::vector<runtime::Input> in = {{{}, donated}, {{}, grads}};
  std::vector<runtime::Output> out = {{.keep = true, .device = donated}};
  exec.run(in, out);
  EXPECT_EQ(out[0].device.get(), donated.get());
  EXPECT_EQ(exec.lastCall().outputsInPlace, 1);
  const float* got = reinterpret_cast<const float*>(donated.get());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], pv[size_t(i)] - 0.5f * gv[size_t(i)]) << i;

  // Not donated: the result gets bytes of its own and the input stays as it was.
  Array x = Array::of<float>({n}, pv), g = Array::of<float>({n}, gv);
  Array y = exec.run(std::vector<Array>{x, g})[0];
  EXPECT_EQ(exec.lastCall().outputsInPlace, 0);
  EXPECT_EQ(x.values<float>()[3], pv[3]);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.values<float>()[size_t(i)], pv[size_t(i)] - 0.5f * gv[size_t(i)]) << i;

  // Kept but not donated: computed in a fresh buffer the caller keeps.
  std::memcpy(donated.get(), pv.data(), n * 4);
  in = {{{}, donated}, {{}, grads}};
  out = {{.keep = true}};
  exec.run(in, out);
  ASSERT_TRUE(out[0].device);
  EXPECT_NE(out[0].device.get(), donated.get());
  EXPECT_EQ(reinterpret_cast<const float*>(out[0].device.get())[7], pv[7] - 0.5f * gv[7]);
  EXPECT_EQ(got[7], pv[7]) << "the undonated input was written";

  // The donor passed again as the gradient: no input's bytes are written while another reads them.
  std::memcpy(donated.get(), pv.data(), n * 4);
  in = {{{}, donated}, {{}, donated}};
  out = {{.keep = true, .device = donated}};
  exec.run(in, out);
  EXPECT_EQ(exec.lastCall().outputsInPlace, 0);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], pv[size_t(i)] - 0.5f * pv[size_t(i)]) << i;

  Program readLater = update(n);  // the donor read after the update
  readLater.buffers.push_back({DType::f32, {n}, {}});
  readLater.steps.push_back({"relu", {0}, {3}, {}, "u.cpp:2"});
  readLater.outputs = {2, 3};
  readLater.outputPlacements = {{}, {}};
  readLater.outputDonors = {0, -1};
  Program returned = update(n);  // the donor also returned as it came
  returned.outputs = {2, 0};
  returned.outputPlacements = {{}, {}};
  returned.outputDonors = {0, -1};
  Program unfused = update(n);  // a kernel that need not read an element before writing it
  unfused.steps[0] = {"matmul", {0, 1}, {2}, {}, "u.cpp:1"};
  Program segments = update(n);  // two segments: the donor read by the first, the output the second's
  segments.buffers.push_back({DType::f32, {n}, {}});
  segments.steps[0].inputs = {1, 0, 0, 1};
  segments.steps[0].outputs = {3, 2};
  segments.steps[0].attrs["segments"] = int64_t(2);
  for (const Program* q : {&readLater, &returned, &unfused, &segments})
    EXPECT_FALSE(runtime::inPlaceOutputs(*q)[0]) << q->toText();
  Program earlier = unfused;  // any kernel, when the donor's last reader runs before it
  earlier.buffers.push_back({DType::f32, {n}, {}});
  earlier.steps = {{"relu", {0}, {3}, {}, "u.cpp:1"}, {"add", {3, 1}, {2}, {}, "u.cpp:2"}};
  EXPECT_TRUE(runtime::inPlaceOutputs(earlier)[0]) << earlier.toText();
  segments.steps[0].inputs = {1, 1, 0, 1};  // the donor in the output's segment alone
  EXPECT_TRUE(runtime::inPlaceOutputs(segments)[0]) << segments.toText();
}

// A small decoder block's training step (transformerLogits: its heads are split and merged by
// reshapes): the same bits with and without the plan, and the plan puts reshapes in place.
TEST(MemoryPlanTest, TransformerStepIsBitIdenticalWithThePlan) {
  constexpr int64_t vocab = 32, tokens = 8;
  Tree params = models::transformerInit(vocab, 16, 32, DType::f32, 3);
  auto loss = [](const Tree& p, const Tensor& ids, const Tensor& next) {
    return value_and_grad([&](const Tree& q) {
      Tensor logits = models::transformerLogits(q, ids, {.heads = 2});
      return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), reshape(next, {-1})), {0});
    })(p);
  };
  auto planned = jit(loss, {.name = "planned"});
  auto unplanned = jit(loss, {.name = "unplanned", .planMemory = false});
  std::vector<int32_t> ids(2 * tokens), next(2 * tokens);
  for (int64_t i = 0; i < 2 * tokens; ++i) ids[i] = int32_t(i * 7 % vocab), next[i] = int32_t((i * 7 + 3) % vocab);
  Tensor x = Array::of<int32_t>({2, tokens}, ids), y = Array::of<int32_t>({2, tokens}, next);
  auto [a, ga] = planned(params, x, y);
  auto [b, gb] = unplanned(params, x, y);
  testing::expectSameBits(a.array(), b.array(), "loss");
  for (const auto& [path, leaf] : ga)
    testing::expectSameBits(leaf.array(), gb.at(path).array(), "gradient of " + path);
  const Program& program = planned.lastProgram();
  int inPlace = 0;
  for (const runtime::Step& step : program.steps)
    if (step.op == "reshape" && program.buffers[step.inputs[0]].offset >= 0 &&
        program.buffers[step.inputs[0]].offset == program.buffers[step.outputs[0]].offset)
      ++inPlace;
  EXPECT_GE(inPlace, 4) << program.toText();
}

// A reduced-width ResNet-18 SGD step: every output identical to the bit with and without the plan.
TEST(MemoryPlanTest, TrainStepIsBitIdenticalWithThePlan) {
  auto model = models::resnet18({.width = 4});
  auto [params, state] = model->initialize(5);
  optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  Tree opt = sgd.init(params);
  auto [x, y] = bench::syntheticBatch(6);
  auto planned = jit(bench::trainStep(*model, sgd), {.name = "planned"});
  auto unplanned = jit(bench::trainStep(*model, sgd), {.name = "unplanned", .planMemory = false});
  auto a = planned(params, opt, state, x, y);
  auto b = unplanned(params, opt, state, x, y);
  testing::expectSameTrainStepBits(a, b);
  // A second call reuses the arena: still the same as the unplanned executor.
  auto a2 = planned(std::get<0>(a), std::get<1>(a), std::get<2>(a), x, y);
  auto b2 = unplanned(std::get<0>(b), std::get<1>(b), std::get<2>(b), x, y);
  testing::expectSameBits(std::get<3>(a2).array(), std::get<3>(b2).array(), "loss after two steps");

  const std::string& text = planned.lastProgramText();
  auto arenaAt = text.find(", arena ");
  ASSERT_NE(arenaAt, std::string::npos) << text.substr(0, 200);
  EXPECT_EQ(unplanned.lastProgramText().find(", arena "), std::string::npos);
}

}  // namespace
}  // namespace spmd
