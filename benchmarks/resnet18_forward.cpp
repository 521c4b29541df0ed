// Google Benchmark: ResNet-18 forward (full width, batch 64, 1x28x28, BatchNorm in training
// mode) on the CPU backend, compiled once by spmd::jit and then replayed, with and without the
// backend's blocked layouts (layouts:0 keeps every tensor plain NCHW: what spmd-assign-layouts gains);
// GFLOP/s and peak_pct as in resnet18_train_step.cpp.
#include <benchmark/benchmark.h>

#include "BenchMain.h"

#include "FlopCounters.h"
#include "frontend/spmd.h"
#include "frontend/models/ResNet.h"

namespace {

void BM_ResNet18Forward(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const bool layouts = state.range(1) != 0;
  auto model = spmd::models::resnet18();
  auto [params, bnState] = model->initialize(0);
  auto forward = spmd::jit([&](const spmd::Tree& p, const spmd::Tree& s, const spmd::Tensor& x) {
    return model->apply(p, s, x, /*training=*/true).first;
  }, {.assignLayouts = layouts});
  spmd::Rng rng(1);
  spmd::Tensor x = spmd::init::normal(1.0)(rng, {batch, 1, 28, 28});
  forward(params, bnState, x);  // trace + compile + first run outside the timing
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) benchmark::DoNotOptimize(forward(params, bnState, x));
  const double seconds = bench::secondsSince(start);
  state.SetItemsProcessed(state.iterations() * batch);
  bench::reportFlops(state, bench::programFlops(forward.lastProgram()), seconds);
}
BENCHMARK(BM_ResNet18Forward)
    ->ArgNames({"batch", "layouts"})
    ->Args({64, 1})
    ->Args({64, 0})
    ->Args({2, 1})  // the compare script's --smoke run in CI
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_resnet18_forward",
                              "ResNet-18 forward (full width, batch 64) on the CPU backend, with and without blocked layouts.");
}
