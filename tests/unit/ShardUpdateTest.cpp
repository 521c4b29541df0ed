// ZeRO-1 (PmapOptions::shardUpdate, passes/ShardUpdate.cpp): each replica updates its 1/N slice
// of the parameters and optimizer state, and the results are the same bits as the replicated
// update, step after step: ResNet-18 at width 2 on 16x16 inputs in f32 with per-replica
// BatchNorm, 5 steps on cpu:2, cpu:3 and cpu:4, SGD (momentum, Nesterov, weight decay) and Adam with a
// scheduled rate, gradient clipping by global norm and a parameter EMA. FSDP
// (PmapOptions::fullyShard, passes/GatherAtUse.cpp) the same, in f32 and f64, with its memory
// plan held to the bound the sharding promises. Both with gradient accumulation too (the slices cut
// over the devices, the gradients reduce-scattered once per step from the accumulated sums).
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>

#include "TestUtil.h"
#include "TreeCompare.h"
#include "compiler/SplitAccumulation.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/exec/DeviceArray.h"
#include "runtime/program/MemoryPlan.h"

namespace spmd {
namespace {

using spmd::testing::firstBitDifference;
using spmd::testing::randomArray;

constexpr int64_t kBatch = 12, kSize = 16;
const optim::SgdConfig kSgd{.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4, .nesterov = true};
const optim::AdamConfig kAdam{.learningRate = 1e-3, .weightDecay = 1e-4};
const optim::RmsPropConfig kRmsProp{.learningRate = 1e-3, .weightDecay = 1e-4, .momentum = 0.5, .centered = true};
const optim::AdagradConfig kAdagrad{.learningRate = 1e-2, .lrDecay = 0.1, .initialAccumulatorValue = 0.1};

enum class Optimizer { Sgd, AdamClipped, RmsPropCentered, Adagrad };

Tree initialOptimizerState(Optimizer kind, const Tree& params) {
  switch (kind) {
    case Optimizer::Sgd: return optim::Sgd(kSgd).init(params);
    case Optimizer::AdamClipped: return optim::Adam(kAdam).init(params);
    case Optimizer::RmsPropCentered: return optim::RmsProp(kRmsProp).init(params);
    case Optimizer::Adagrad: return optim::Adagrad(kAdagrad).init(params);
  }
  return {};
}

std::pair<Tree, Tree> optimizerUpdate(Optimizer kind, const Tree& params, const Tree& grads, const Tree& opt,
                                      const Tensor& rate) {
  switch (kind) {
    case Optimizer::Sgd: return optim::Sgd(kSgd).update(params, grads, opt, rate);
    case Optimizer::AdamClipped: return optim::Adam(kAdam).update(params, optim::clipByGlobalNorm(grads, 0.5).grads, opt, rate);
    case Optimizer::RmsPropCentered: return optim::RmsProp(kRmsProp).update(params, grads, opt, rate);
    case Optimizer::Adagrad: return optim::Adagrad(kAdagrad).update(params, grads, opt, rate);
  }
  return {};
}
enum class Sharding { None, Update, Full };  // replicated, ZeRO-1, FSDP

struct Vars {
  Tree params, state, opt, ema;
  Tensor loss;
};

Vars initialVars(const nn::Module& model, Optimizer kind, DType dtype = DType::f32) {
  auto [params, state] = spmd::testing::kaimingInit(model, dtype);
  Tree opt = initialOptimizerState(kind, params);
  return {params, state, opt, optim::Ema(0.9).init(params), Tensor()};
}

auto trainStep(const nn::Module& model, Optimizer kind, const std::string& devices, Sharding sharding,
               int accumulate = 1, bool prefetch = false, bool donate = true, int microAtOnce = 0) {
  return pmap(
      [&model, kind](const Tree& params, const Tree& state, const Tree& opt, const Tree& ema, const Tensor& x,
                     const Tensor& y, const Tensor& rate) {
        auto [loss, grads, newState] = value_and_grad(
            [&](const Tree& p) {
              auto [logits, s] = model.apply(p, state, x, /*training=*/true);
              return std::pair{mean(softmaxCrossEntropy(logits, y), {0}), s};
            },
            has_aux)(params);
        auto [newParams, newOpt] = optimizerUpdate(kind, params, grads, opt, rate);
        return std::tuple{newParams, newState, newOpt, optim::Ema(0.9).update(ema, newParams), loss};
      },
      {.inAxes = {replicated, replicated, replicated, replicated, split, split, replicated},
       .devices = devices,
       .donateArguments = donate ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{},
       .accumulate = accumulate,
       .microBatchesAtOnce = microAtOnce,
       .shardUpdate = sharding == Sharding::Update,
       .fullyShard = sharding == Sharding::Full,
       .prefetchGathers = prefetch});
}

Array images(int step, DType dtype) { return randomArray(dtype, {kBatch, 1, kSize, kSize}, 100 + step, -1, 1); }
Array labels(int step) {
  Array y = Array::zeros(DType::i32, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) y.values<int32_t>()[i] = int32_t((i * 7 + step * 3) % 10);
  return y;
}

template <typename Step>
Vars step(Step& f, const Vars& v, int i, DType dtype = DType::f32) {
  const double rate = 0.05 * std::pow(0.8, i);  // a schedule: the rate is an input, not a constant
  auto [params, state, opt, ema, loss] =
      f(v.params, v.state, v.opt, v.ema, Tensor(images(i, dtype)), Tensor(labels(i)),
        Tensor(optim::rateAt([=](int64_t) { return rate; }, i, dtype)));
  return {params, state, opt, ema, loss};
}

// Every tree and the loss of `a` and `b` are the same bits ("" when they are).
std::string difference(const Vars& a, const Vars& b) {
  for (auto [name, x, y] : {std::tuple{"params", &a.params, &b.params}, {"state", &a.state, &b.state},
                            {"optimizer state", &a.opt, &b.opt}, {"ema", &a.ema, &b.ema}})
    if (std::string d = firstBitDifference(*x, *y); !d.empty()) return std::string(name) + " '" + d + "'";
  if (std::memcmp(a.loss.array().data(), b.loss.array().data(), a.loss.array().bytes()) != 0) return "loss";
  return "";
}

// What the memory plan of a sharded step holds at its fullest step: the most bytes of whole
// parameters rebuilt from slices (an all_gather of sliced inputs, one or several concatenated in
// a bucket, and the reshapes, slices and relayouts after it) that are live at once, and the
// replica's resident bytes (arena and the buffers outside it, runtime::residentBytes).
struct PlannedParameters {
  size_t gatheredAtOnce = 0, resident = 0;
  int gathers = 0, scatters = 0;
  int gatheredMembers = 0;       // sliced inputs gathered, counted once per gather that carries them
  std::set<int> gatheredInputs;  // the sliced inputs gathered (the parameters, not the optimizer state)
};

PlannedParameters plannedParameters(const runtime::Program& program) {
  PlannedParameters out;
  std::vector<bool> gathered(program.buffers.size(), false);
  std::map<int, std::vector<int>> bucketOf;  // a concatenation of sliced inputs -> those inputs
  auto slicedInput = [&](int id) {
    for (size_t i = 0; i < program.inputs.size(); ++i)
      if (program.inputs[i] == id) return program.inputPlacements[i].kind == runtime::Placement::Kind::Sliced;
    return false;
  };
  for (const runtime::Step& step : program.steps) {
    if (step.op == "concatenate" && std::all_of(step.inputs.begin(), step.inputs.end(), slicedInput))
      bucketOf[step.outputs.at(0)] = step.inputs;
    std::vector<int> members;
    if (step.op == "all_gather" && slicedInput(step.inputs.at(0))) members = {step.inputs[0]};
    if (step.op == "all_gather" && bucketOf.count(step.inputs.at(0))) members = bucketOf[step.inputs[0]];
    const bool gather = !members.empty();
    const bool rebuild = (step.op == "reshape" || step.op == "slice" || step.op == "relayout") &&
                         gathered[size_t(step.inputs.at(0))];
    if (gather) ++out.gathers, out.gatheredMembers += int(members.size());
    out.gatheredInputs.insert(members.begin(), members.end());
    out.scatters += step.op == "reduce_scatter";
    if (gather || rebuild)
      for (int id : step.outputs) gathered[size_t(id)] = true;
  }
  const std::vector<runtime::Lifetime> life = runtime::lifetimes(program);
  for (int s = 0; s < int(program.steps.size()); ++s) {
    size_t live = 0;
    for (size_t id = 0; id < program.buffers.size(); ++id)
      if (gathered[id] && life[id].first <= s && s <= life[id].last) live += program.buffers[id].bytes();
    out.gatheredAtOnce = std::max(out.gatheredAtOnce, live);
  }
  out.resident = runtime::residentBytes(program, false);
  return out;
}

size_t treeBytes(const Tree& tree) {
  size_t bytes = 0;
  for (const auto& [name, t] : tree) bytes += size_t(t.numel()) * dtypeSize(t.dtype());
  return bytes;
}

size_t largestBytes(const Tree& tree) {
  size_t bytes = 0;
  for (const auto& [name, t] : tree) bytes = std::max(bytes, size_t(t.numel()) * dtypeSize(t.dtype()));
  return bytes;
}

// FSDP gathers each sliced parameter right before each reader (the forward pass's and the
// backward pass's), so parameters are gathered more often than there are sliced inputs; the
// parameters one reader needs (a convolution's weight and bias) in one bucket.
void expectGatheredAtEachReader(const runtime::Program& program) {
  const PlannedParameters planned = plannedParameters(program);
  EXPECT_GT(planned.gatheredMembers, int(planned.gatheredInputs.size()) + 20) << program.toText();
  EXPECT_LT(planned.gathers, planned.gatheredMembers) << "no reader's parameters were gathered in one bucket";
}

// How many gathers have other work (not rebuilding parameters) between them and the first op
// that reads what they gathered: with prefetch the previous layer's, one reader ahead.
int gathersAhead(const runtime::Program& program) {
  auto rebuilds = [](const std::string& op) {
    return op == "reshape" || op == "slice" || op == "relayout" || op == "concatenate" || op == "all_gather";
  };
  int ahead = 0;
  for (size_t g = 0; g < program.steps.size(); ++g) {
    if (program.steps[g].op != "all_gather") continue;
    std::set<int> derived(program.steps[g].outputs.begin(), program.steps[g].outputs.end());
    int work = 0;
    for (size_t s = g + 1; s < program.steps.size(); ++s) {
      const runtime::Step& step = program.steps[s];
      const bool reads = std::any_of(step.inputs.begin(), step.inputs.end(), [&](int id) { return derived.count(id); });
      if (reads && !rebuilds(step.op)) break;  // the gathered parameter's reader
      if (reads) derived.insert(step.outputs.begin(), step.outputs.end());
      else if (!rebuilds(step.op)) ++work;
    }
    ahead += work > 0;
  }
  return ahead;
}

struct Case {
  Optimizer kind = Optimizer::Sgd;
  std::string devices;
  int replicas = 1;
  std::string bnAxis = "";
  Sharding sharding = Sharding::Update;
  DType dtype = DType::f32;
  int accumulate = 1;  // micro-batches per replica (both steps)
  bool prefetch = false;  // FSDP's gathers one layer ahead
};

void expectSameBitsAsReplicated(const Case& c) {
  const auto [kind, devices, replicas, bnAxis, sharding, dtype, accumulate, prefetch] = c;
  auto model = models::resnet18({.width = 2, .bnAxisName = bnAxis});
  // The sharded step runs all of a device's micro-batches at once (from its second call), the
  // replicated one one at a time: their gathers and leaves stay each micro-batch's own.
  auto replicatedStep = trainStep(*model, kind, devices, Sharding::None, accumulate, false, true, 1);
  const bool ownMemory = std::string(devices).rfind("sim", 0) == 0;  // one micro-batch at a time there
  auto shardedStep = trainStep(*model, kind, devices, sharding, accumulate, prefetch, true, ownMemory ? 0 : accumulate);
  Vars plain = initialVars(*model, kind, dtype), sharded = plain;
  for (int i = 0; i < 5; ++i) {
    plain = step(replicatedStep, plain, i, dtype);
    sharded = step(shardedStep, sharded, i, dtype);
    EXPECT_EQ(difference(sharded, plain), "") << devices << ", accumulate " << accumulate << ", step " << i + 1;
    ASSERT_TRUE(std::isfinite(spmd::testing::convertArray(plain.loss.array(), DType::f64).values<double>()[0]));
  }
  // The state stayed sliced on the devices: each replica holds ceil(numel / N) of every tensor.
  int64_t total = 0, perReplica = 0;
  for (const auto& [name, t] : sharded.opt) {
    const auto& resident = t.resident();
    ASSERT_TRUE(resident) << name;
    if (t.rank() == 0) continue;  // Adam's bias-correction powers, Adagrad's step count stay replicated
    EXPECT_EQ(resident->layout(), runtime::DeviceArray::Layout::Sliced) << name;
    EXPECT_EQ(resident->localShape(), (Shape{(t.numel() + replicas - 1) / replicas})) << name;
    total += t.numel();
    perReplica += resident->localShape()[0];
  }
  EXPECT_LE(perReplica, total / replicas + 4 * int64_t(sharded.opt.size()));
  EXPECT_NE(shardedStep.lastProgramText().find("all_gather"), std::string::npos);
  if (sharding == Sharding::Full) expectGatheredAtEachReader(shardedStep.lastProgram());
  if (prefetch) {  // most gathers moved ahead of the previous layer's work, against the same step without
    auto plain = trainStep(*model, kind, devices, sharding, accumulate, false);
    step(plain, initialVars(*model, kind, dtype), 0, dtype);
    const int ahead = gathersAhead(shardedStep.lastProgram()), before = gathersAhead(plain.lastProgram());
    EXPECT_GT(ahead, before + plannedParameters(plain.lastProgram()).gathers / 3) << ahead << " vs " << before;
  }
  // Bucketed as the all-reduce is (spmd-combine-sharded-collectives): ZeRO-1's gathers at the top
  // of the step, all of these small parameters, are one; the gradients' reduce-scatters a few
  // (a bucket closes where a result is needed before the next gradient exists).
  const PlannedParameters planned = plannedParameters(shardedStep.lastProgram());
  if (sharding == Sharding::Update) {
    EXPECT_EQ(planned.gathers, 1) << shardedStep.lastProgramText();
  }
  if (kind == Optimizer::Sgd) { EXPECT_LE(planned.scatters, 4) << shardedStep.lastProgramText(); }
  // With accumulation the slices are the devices' (checked above) and the whole step's program
  // says so; the micro-batch part gathers, the once-a-step part reduce-scatters.
  if (accumulate > 1) { EXPECT_EQ(shardedStep.lastProgram().microBatches, accumulate); }
  if (kind == Optimizer::Sgd) {  // clipping reads the whole gradient: Adam's keep their all_reduce
    const std::string text = shardedStep.lastProgramText();
    EXPECT_NE(text.find("reduce_scatter"), std::string::npos);
    EXPECT_EQ(replicatedStep.lastProgramText().find("reduce_scatter"), std::string::npos);
    // The gradients' mean stays a reduce_scatter's reduction, divided by the replicas the job
    // runs: no divisor of N is written into the program (an edited replica count cannot leave a
    // stale one behind).
    std::istringstream lines(text);
    int scatters = 0;
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("  reduce_scatter ", 0) == 0) {
        ++scatters;
        EXPECT_NE(line.find("reduction = \"mean\""), std::string::npos) << line;
      }
    EXPECT_GT(scatters, 0);
  }
}

TEST(ShardUpdateTest, SgdIsTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated({.devices = "cpu:2", .replicas = 2});
  expectSameBitsAsReplicated({.devices = "cpu:3", .replicas = 3});  // the mean's division by 3 is not exact
  expectSameBitsAsReplicated({.devices = "cpu:4", .replicas = 4});
}

// Cross-replica BatchNorm: its statistics' psums are all_reduces too; what is computed from them
// stays whole where the normalization reads it (the running statistics become sliced state).
TEST(ShardUpdateTest, CrossReplicaBatchNormIsTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated({.devices = "cpu:2", .replicas = 2, .bnAxis = "batch"});
}

TEST(ShardUpdateTest, ClippedAdamWithEmaIsTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated({.kind = Optimizer::AdamClipped, .devices = "cpu:4", .replicas = 4});
}

// RMSprop's three buffers a parameter (centered, momentum) and Adagrad's sum with its replicated
// step count for the rate's decay: elementwise updates the pass slices as it slices SGD's.
TEST(ShardUpdateTest, RmsPropAndAdagradAreTheReplicatedUpdateBitForBit) {
  expectSameBitsAsReplicated({.kind = Optimizer::RmsPropCentered, .devices = "cpu:2", .replicas = 2});
  expectSameBitsAsReplicated({.kind = Optimizer::Adagrad, .devices = "cpu:3", .replicas = 3});
}

// Checkpoints stay layout-free: a run switches between sharded and replicated steps (sliced
// values are gathered where a replicated step reads them, host values sliced where a sharded one
// does) and still gives the replicated run's bits.
TEST(ShardUpdateTest, ARunSwitchesBetweenShardedAndReplicatedSteps) {
  auto model = models::resnet18({.width = 2, .bnAxisName = ""});
  auto replicatedStep = trainStep(*model, Optimizer::Sgd, "cpu:2", Sharding::None);
  auto shardedStep = trainStep(*model, Optimizer::Sgd, "cpu:2", Sharding::Update);
  Vars plain = initialVars(*model, Optimizer::Sgd), mixed = plain;
  for (int i = 0; i < 4; ++i) {
    plain = step(replicatedStep, plain, i);
    mixed = i % 2 == 0 ? step(shardedStep, mixed, i) : step(replicatedStep, mixed, i);
  }
  EXPECT_EQ(difference(mixed, plain), "");
}

// FSDP: gathered right before each reader, the same bits as the replicated step in f32 and f64,
// with per-replica and cross-replica BatchNorm, SGD and clipped Adam with an EMA.
TEST(ShardUpdateTest, FsdpIsTheReplicatedStepBitForBit) {
  expectSameBitsAsReplicated({.devices = "cpu:2", .replicas = 2, .sharding = Sharding::Full});
  expectSameBitsAsReplicated({.devices = "cpu:3", .replicas = 3, .sharding = Sharding::Full, .dtype = DType::f64});
  expectSameBitsAsReplicated({.kind = Optimizer::AdamClipped, .devices = "cpu:4", .replicas = 4, .bnAxis = "batch",
                              .sharding = Sharding::Full});
  expectSameBitsAsReplicated({.devices = "cpu:2", .replicas = 2, .sharding = Sharding::Full, .prefetch = true});
}

// The memory plan, not a measurement: full-width ResNet-18 (44.7 MB of f32 parameters) on 8x8
// images and 3 rows per replica, where the parameters outweigh the activations. ZeRO-1 keeps
// every gathered parameter alive from the top of the step to its reader in the backward pass;
// FSDP holds at most the two largest layers' whole parameters at any step, and its resident
// bytes are below ZeRO-1's by nearly the whole parameter set. Both with their collectives bucketed;
// FSDP gathering one layer ahead holds one layer more.
TEST(ShardUpdateTest, FsdpPlanHoldsAtMostTwoLayersOfWholeParameters) {
  auto model = models::resnet18({.width = 64, .bnAxisName = ""});
  Vars start = initialVars(*model, Optimizer::Sgd);
  const size_t params = treeBytes(start.params), largest = largestBytes(start.params);
  const Array x = randomArray(DType::f32, {12, 1, 8, 8}, 7, -1, 1);
  Array y = Array::zeros(DType::i32, {12});
  for (int64_t i = 0; i < 12; ++i) y.values<int32_t>()[i] = int32_t(i % 10);
  std::map<std::pair<Sharding, bool>, PlannedParameters> planned;
  for (auto [sharding, prefetch] : {std::pair{Sharding::Update, false}, {Sharding::Full, false}, {Sharding::Full, true}}) {
    auto f = trainStep(*model, Optimizer::Sgd, "cpu:4", sharding, 1, prefetch);
    f(start.params, start.state, start.opt, start.ema, Tensor(x), Tensor(y), Tensor(optim::rateAt([](int64_t) {
        return 0.01;
      }, 0)));
    planned[{sharding, prefetch}] = plannedParameters(f.lastProgram());
  }
  const PlannedParameters& zero = planned[{Sharding::Update, false}];
  const PlannedParameters& fsdp = planned[{Sharding::Full, false}];
  const PlannedParameters& prefetched = planned[{Sharding::Full, true}];
  std::printf("parameters %.1f MB (largest %.1f MB); whole parameters live at once: ZeRO-1 %.1f MB, FSDP %.1f MB; "
              "resident per replica: ZeRO-1 %.1f MB, FSDP %.1f MB; all-gathers / reduce-scatters: ZeRO-1 %d / %d, "
              "FSDP %d / %d\n",
              params / 1e6, largest / 1e6, zero.gatheredAtOnce / 1e6, fsdp.gatheredAtOnce / 1e6, zero.resident / 1e6,
              fsdp.resident / 1e6, zero.gathers, zero.scatters, fsdp.gathers, fsdp.scatters);
  EXPECT_LE(fsdp.gatheredAtOnce, 2 * largest);
  EXPECT_GE(zero.gatheredAtOnce, params * 9 / 10);  // the check can fail: ZeRO-1 holds them all
  EXPECT_LE(fsdp.resident + params - 4 * largest, zero.resident);
  // Bucketed (at most 4 MB a bucket here: the 62 tensors' collectives in a dozen or so) at no cost
  // in memory: the bounds above hold with the buckets.
  for (const PlannedParameters* p : {&zero, &fsdp}) EXPECT_LE(p->scatters, 16);
  EXPECT_LE(zero.gathers, 16);
  EXPECT_LT(fsdp.gathers, fsdp.gatheredMembers);
  // Prefetching holds one more layer's gathered parameters, and still far less than ZeRO-1.
  std::printf("FSDP with prefetch: whole parameters live at once %.1f MB, resident per replica %.1f MB\n",
              prefetched.gatheredAtOnce / 1e6, prefetched.resident / 1e6);
  EXPECT_LE(prefetched.gatheredAtOnce, 3 * largest);
  EXPECT_LT(prefetched.resident, zero.resident);
}

// Gradient accumulation: each device's micro-batches share its slice; the gradients' sums over the
// micro-batches are reduce-scattered once a step, into the same bits as the replicated step with
// the same accumulation (itself the bits of one micro-batch per replica on devices x accumulate).
// Clipping keeps the gradients whole, so the update slices them at the device's index.
TEST(ShardUpdateTest, ShardedStepsWithAccumulationAreTheReplicatedStepBitForBit) {
  expectSameBitsAsReplicated({.devices = "cpu:2", .replicas = 2, .sharding = Sharding::Full, .accumulate = 2});
  expectSameBitsAsReplicated({.devices = "cpu:3", .replicas = 3, .accumulate = 2});  // ZeRO-1, a mean over 6
  expectSameBitsAsReplicated({.kind = Optimizer::AdamClipped, .devices = "cpu:3", .replicas = 3,
                              .sharding = Sharding::Full, .accumulate = 4});  // one row per micro-batch
  // On the simulator: the reduce-scatter folds each device's subtree and divides by every leaf there.
  expectSameBitsAsReplicated({.devices = "sim:2", .replicas = 2, .accumulate = 2});

}

// Gradient accumulation with donated state: the once-a-step part computes each donated output in
// its donor's buffers (runtime::inPlaceOutputs of the split's apply part) instead of copying it
// there after its steps; the BatchNorm statistics too, whose donors the micro-batches read and
// the apply part only writes. Replicated and ZeRO-1, with the bits of the same steps undonated.
TEST(ShardUpdateTest, AccumulatedStepsUpdateDonatedStateInPlaceWithTheUndonatedBits) {
  auto model = models::resnet18({.width = 2});
  for (Sharding sharding : {Sharding::None, Sharding::Update}) {
    const std::string what = sharding == Sharding::None ? "replicated" : "ZeRO-1";
    auto donating = trainStep(*model, Optimizer::Sgd, "cpu:2", sharding, 2);
    auto keeping = trainStep(*model, Optimizer::Sgd, "cpu:2", sharding, 2, false, /*donate=*/false);
    Vars a = initialVars(*model, Optimizer::Sgd), b = a;
    auto buffersOf = [](const Vars& v) {
      std::set<const std::byte*> all;
      for (const Tree* tree : {&v.params, &v.state, &v.opt, &v.ema})
        for (const auto& [name, t] : *tree)
          for (int r = 0; r < 2; ++r) all.insert(t.resident()->buffer(r).get());
      return all;
    };
    a = step(donating, a, 0), b = step(keeping, b, 0);  // the first call brings the state over
    const std::set<const std::byte*> first = buffersOf(a);
    const size_t tensors = a.params.size() + a.state.size() + a.opt.size() + a.ema.size();
    ASSERT_EQ(first.size(), 2 * tensors) << what << ": two outputs share a buffer";
    for (int i = 1; i < 4; ++i) {
      a = step(donating, a, i), b = step(keeping, b, i);
      EXPECT_EQ(difference(a, b), "") << what << ", step " << i + 1;
      EXPECT_EQ(buffersOf(a), first) << what << ", step " << i + 1 << " wrote state outside the donated buffers";
      EXPECT_EQ(donating.lastCall().outputsInPlace, int64_t(2 * tensors)) << what << ", step " << i + 1;
      EXPECT_EQ(keeping.lastCall().outputsInPlace, 0) << what;
    }
  }
}

// The accumulation split's parts compute in place what the step keeps: the apply part pairs the
// step's donated outputs with their donors (BatchNorm's statistics too, whose donors become
// inputs it only writes), the micro part each accumulated operand (the gradients) with an
// input of its own that the fold's leaf is passed in; runtime::inPlaceOutputs allows every pair,
// so neither part's plan gives those outputs bytes of their own.
TEST(ShardUpdateTest, AccumulationPartsComputeDonatedStateAndGradientsInPlace) {
  auto model = models::resnet18({.width = 2});
  auto f = trainStep(*model, Optimizer::Sgd, "cpu:2", Sharding::None);
  const Vars v = step(f, initialVars(*model, Optimizer::Sgd), 0);
  const runtime::Program& whole = f.lastProgram();
  const AccumulationSplit split = splitForAccumulation(whole, std::vector<std::string>(whole.outputs.size(), "output"));
  auto pairedInPlace = [](const runtime::Program& part, int& paired) {
    const std::vector<bool> inPlace = runtime::inPlaceOutputs(part);
    int both = 0;
    paired = 0;
    for (size_t k = 0; k < part.outputs.size(); ++k)
      if (!part.outputDonors.empty() && part.outputDonors[k] >= 0) ++paired, both += inPlace[k];
    return both;
  };
  int paired = 0;
  const int state = int(v.params.size() + v.state.size() + v.opt.size() + v.ema.size());
  EXPECT_EQ(pairedInPlace(split.apply, paired), state);
  EXPECT_EQ(paired, state);
  ASSERT_GT(split.accumulated, 0);
  int intoLeaves = 0;
  for (int j = 0; j < split.accumulated; ++j) intoLeaves += runtime::intoLeaf(split, j);
  EXPECT_EQ(intoLeaves, split.accumulated);
  EXPECT_EQ(pairedInPlace(split.micro, paired), split.accumulated);
  EXPECT_EQ(paired, split.accumulated);
  EXPECT_EQ(split.micro.inputs.size(), split.microInputs.size() + size_t(split.accumulated));
}

// What the plan holds for an accumulated step (lastPlannedBytes: both parts, the gradients'
// fold, the inputs; one micro-batch at a time): less than the whole batch's step where activations outweigh parameters
// (width 2 on 16x16 images; at full width, batch 64, the fold's gradients cancel the saving:
// README); at least the parameters, momentum and EMA and the fold at its deepest (three
// gradients for 4 micro-batches); unaccumulated, the program's resident bytes.
TEST(ShardUpdateTest, AnAccumulatedStepPlansLessThanTheWholeBatchWithItsFold) {
  auto model = models::resnet18({.width = 2});
  auto planned = [&](int accumulate, int atOnce) {
    auto f = trainStep(*model, Optimizer::Sgd, "cpu:1", Sharding::None, accumulate, false, true, atOnce);
    step(f, initialVars(*model, Optimizer::Sgd), 0);
    if (accumulate == 1) {
      EXPECT_EQ(f.lastPlannedBytes(), runtime::residentBytes(f.lastProgram(), false));
    }
    return f.lastPlannedBytes();
  };
  const size_t whole = planned(1, 0), accumulated = planned(4, 1);
  // Two micro-batches at once: a second micro part's arena, leaf and copies; by default only as
  // many as the host's memory holds (here, as SPMD_HOST_MEMORY_BYTES says, one).
  const size_t two = planned(4, 2);
  EXPECT_GT(two, accumulated);
  setenv("SPMD_HOST_MEMORY_BYTES", std::to_string((accumulated + two) / 2).c_str(), 1);
  const size_t fitted = planned(4, 0);
  unsetenv("SPMD_HOST_MEMORY_BYTES");
  EXPECT_EQ(fitted, accumulated);
  const Vars v = initialVars(*model, Optimizer::Sgd);
  const size_t parameterBytes = size_t(v.params.numElements()) * 4;
  EXPECT_LT(accumulated, whole);
  // parameters, momentum and EMA as inputs, three gradients in the fold, the updated state
  EXPECT_GT(accumulated, 6 * parameterBytes) << "parameters " << parameterBytes;
  std::printf("planned bytes, batch %lld: whole %zu, 4 micro-batches %zu (parameters %zu)\n",
              static_cast<long long>(kBatch), whole, accumulated, parameterBytes);
}

// Cross-replica BatchNorm reduces over one micro-batch's replicas, so with accumulation the
// replicated step averages the micro-batches' updates (its parameters' gradients, and a global
// norm over them, differ between micro-batches), which a sliced update cannot give bit for bit.
// Refused before anything runs, naming the reduction and its layer, with SGD and clipped Adam.
TEST(ShardUpdateTest, ShardingWithAccumulationAndCrossReplicaBatchNormIsRefused) {
  auto model = models::resnet18({.width = 2, .bnAxisName = "batch"});
  for (Optimizer kind : {Optimizer::Sgd, Optimizer::AdamClipped})
    for (Sharding sharding : {Sharding::Update, Sharding::Full}) {
      auto f = trainStep(*model, kind, "cpu:2", sharding, 2);
      Vars v = initialVars(*model, kind);
      const std::string error = spmd::testing::errorOf([&] { step(f, v, 0); });
      EXPECT_NE(error.find("reduces within each micro-batch (cross-replica BatchNorm's statistics, say), so with "
                           "gradient accumulation the replicated step averages the micro-batches' updates"),
                std::string::npos)
          << error;
      EXPECT_NE(error.find("stem.bn"), std::string::npos) << error;
    }
}

TEST(ShardUpdateTest, UnsupportedCombinationsAreClearErrors) {
  auto f = [](const Tensor& x) { return x; };
  EXPECT_NE(spmd::testing::errorOf([&] { pmap(f, {.devices = "cpu:2", .shardedBucketBytes = 0, .shardUpdate = true}); })
                .find("shardedBucketBytes is 0; give the largest combined reduce-scatter or all-gather in bytes"),
            std::string::npos);
  EXPECT_NE(spmd::testing::errorOf([&] { pmap(f, {.devices = "cpu:2", .shardUpdate = true, .prefetchGathers = true}); })
                .find("prefetchGathers applies to fullyShard (FSDP), which is off"),
            std::string::npos);
  try {
    pmap(f, {.devices = "cpu:2", .allReplicas = true, .shardUpdate = true});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shardUpdate (ZeRO-1) with allReplicas is not supported"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace spmd
