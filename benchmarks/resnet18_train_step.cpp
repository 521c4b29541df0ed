// Google Benchmark: one full ResNet-18 training step on the CPU backend (full width, batch 64,
// 1x28x28): forward with train-mode BN, softmax cross-entropy, backward (autodiff pass), SGD
// with momentum, new BN statistics. Compiled once by spmd::jit and then replayed, with and
// without the memory plan (plan), elementwise fusion (fuse) and the backend's blocked layouts
// (layouts); counters give the step's buffer memory in MB and the time from the first call to
// its first finished step (compile_s: trace, passes, lowering, primitive creation), GFLOP/s
// (convolutions counted as direct ones, benchmarks/Flops.h) and that as a share of the measured
// f32 peak (peak_pct).
#include <benchmark/benchmark.h>

#include "BenchMain.h"

#include "FlopCounters.h"
#include "TrainStep.h"
#include "frontend/models/ResNet.h"

namespace {

void BM_ResNet18TrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const bool plan = state.range(1) != 0, fuse = state.range(2) != 0, layouts = state.range(3) != 0;
  auto model = spmd::models::resnet18();
  auto [params, bnState] = model->initialize(0);
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  spmd::Tree opt = sgd.init(params);
  // Parameters, optimizer and BN state donated, as a training loop does (the samples, bench_gpu_step;
  // PyTorch's optimizer.step() updates in place): each step writes them where the last one's were.
  auto step = spmd::jit(bench::trainStep(*model, sgd), {.planMemory = plan, .fuseElementwise = fuse,
                                                        .assignLayouts = layouts, .donateArguments = {0, 1, 2}});
  auto [x, y] = bench::syntheticBatch(batch);
  // Trace + compile + first run outside the timing; each timed step feeds the last one's state.
  auto [p1, o1, s1, l1] = step(params, opt, bnState, x, y);
  const double compileSeconds = step.lastCompileSeconds();  // first call to first finished step
  const double seconds = bench::timeSteps(state, step, p1, o1, s1, x, y);
  state.SetItemsProcessed(state.iterations() * batch);
  auto [total, arena] = bench::programBytes(step.lastProgram());
  state.counters["buffers_MB"] = double(total) / 1e6;  // every buffer on its own
  state.counters["arena_MB"] = double(arena) / 1e6;    // the planned arena
  state.counters["compile_s"] = compileSeconds;        // trace, passes, lowering, first step
  bench::reportFlops(state, bench::programFlops(step.lastProgram()), seconds);
}
// The same step in f64, as a gradient check or a reference run takes it (oneDNN has no f64: the
// convolutions are our direct f64 loops, runtime/cpu/DirectF64Conv.h); the compare script's
// --dtype f64 runs it beside PyTorch's f64 step.
void BM_ResNet18TrainStepF64(benchmark::State& state) {
  const int64_t batch = state.range(0);
  auto model = spmd::models::resnet18();
  auto [params32, bnState32] = model->initialize(0);
  auto toF64 = spmd::jit([](const spmd::Tree& tree) {
    spmd::Tree out;
    for (const auto& [name, t] : tree) out.set(name, spmd::cast(t, spmd::DType::f64));
    return out;
  });
  spmd::Tree params = toF64(params32), bnState = toF64(bnState32);
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::jit(bench::trainStep(*model, sgd), {.donateArguments = {0, 1, 2}});
  auto [x32, y] = bench::syntheticBatch(batch);
  spmd::Tensor x = spmd::jit([](const spmd::Tensor& t) { return spmd::cast(t, spmd::DType::f64); })(x32);
  auto [p1, o1, s1, l1] = step(params, opt, bnState, x, y);
  const double compileSeconds = step.lastCompileSeconds();
  const double seconds = bench::timeSteps(state, step, p1, o1, s1, x, y);
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["compile_s"] = compileSeconds;
  bench::reportFlops(state, bench::programFlops(step.lastProgram()), seconds);
}
// The step in mixed precision (nn::ApplyOptions::compute = bf16, the sample's --precision bf16):
// convolutions and matmuls in bf16 (oneDNN's bf16 kernels where the CPU has AVX512-BF16 or AMX,
// else the f32 kernels between bf16 roundings), BatchNorm, the loss and the update in f32;
// the compare script's --dtype bf16 runs it beside torch.autocast("cpu", bfloat16).
void BM_ResNet18TrainStepBf16(benchmark::State& state) {
  const int64_t batch = state.range(0);
  auto model = spmd::models::resnet18();
  auto [params, bnState] = model->initialize(0);
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::jit(bench::trainStep(*model, sgd, spmd::DType::bf16), {.donateArguments = {0, 1, 2}});
  auto [x, y] = bench::syntheticBatch(batch);
  auto [p1, o1, s1, l1] = step(params, opt, bnState, x, y);
  const double compileSeconds = step.lastCompileSeconds();
  const double seconds = bench::timeSteps(state, step, p1, o1, s1, x, y);
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["compile_s"] = compileSeconds;
  // No share of the f32 peak: AMX's bf16 peak is another (and oneDNN's path is logged at the start).
  state.counters["GFLOP_s"] = bench::programFlops(step.lastProgram()) * double(state.iterations()) / seconds / 1e9;
}
// The step's optimizer update alone: SGD with momentum and weight decay over ResNet-18's
// parameters at a width, donated, the gradients on the device already. One fused step of a
// segment per parameter (compiler/BatchFused), memory-bound at full width; GB_s counts each
// parameter, momentum and gradient read once and each parameter and momentum written once.
void BM_SgdUpdate(benchmark::State& state) {
  auto model = spmd::models::resnet18({.width = state.range(0)});
  auto [params, bnState] = model->initialize(0);
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9, .weightDecay = 5e-4});
  spmd::Tree opt = sgd.init(params);
  spmd::Tree grads = spmd::jit([](const spmd::Tree& p) {  // resident, as the step's own
    spmd::Tree g;
    for (const auto& [name, t] : p) g.set(name, t * 0.5);
    return g;
  })(params);
  auto update = spmd::jit([&](const spmd::Tree& p, const spmd::Tree& o, const spmd::Tree& g) { return sgd.update(p, g, o); },
                          {.donateArguments = {0, 1}});
  std::tie(params, opt) = update(params, opt, grads);
  for (auto _ : state) std::tie(params, opt) = update(params, opt, grads);
  const double bytes = double(params.numElements()) * 4 * 5;
  state.counters["GB_s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SgdUpdate)->ArgNames({"width"})->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_ResNet18TrainStepBf16)->ArgNames({"batch"})->Arg(64)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_ResNet18TrainStepF64)->ArgNames({"batch"})->Arg(8)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK(BM_ResNet18TrainStep)
    ->ArgNames({"batch", "plan", "fuse", "layouts"})
    ->Args({64, 1, 1, 1})
    ->Args({64, 1, 1, 0})  // every tensor plain NCHW: what spmd-assign-layouts gains
    ->Args({64, 0, 1, 1})
    ->Args({64, 1, 0, 1})
    ->Args({2, 1, 1, 1})  // the compare script's --smoke run in CI
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_resnet18_train_step",
                              "One full ResNet-18 training step on the CPU backend, with and without the memory plan, fusion and blocked layouts.");
}
