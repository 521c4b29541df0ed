// The liveness-based memory plan: placement on a hand-made Program, the runtime's check against
// unsafe plans (a Program may come from a file), and a ResNet-18 training step whose results are
// bit-identical with and without the plan while its memory shrinks.

#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "compiler/PlanMemory.h"
#include "frontend/spmd.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/MemoryPlan.h"
#include "runtime/cpu/CpuDevice.h"
#include "frontend/models/ResNet.h"

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
