// Google Benchmark: the SPMD overhead on emulated CPU devices. One reduced-width ResNet-18
// training step (width 16, 1x28x28, per-replica BN, SGD momentum) at the same global batch on
// cpu:1 and cpu:N (args: devices, global batch, width): each replica runs local_batch =
// global / N, gradients are averaged by the compiler-inserted (combined) all-reduce. The ratio
// time(cpu:N) / time(cpu:1) is the overhead (the replicas share the machine's cores). GFLOP/s
// and peak_pct count every replica's convolutions (benchmarks/FlopCounters.h).
#include <benchmark/benchmark.h>

#include "BenchMain.h"

#include "FlopCounters.h"
#include "TrainStep.h"
#include "frontend/models/ResNet.h"

namespace {

void BM_ResNet18PmapStep(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  const int64_t batch = state.range(1), width = state.range(2);
  auto model = spmd::models::resnet18({.width = width, .bnAxisName = ""});
  auto [params, bnState] = model->initialize(0);
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::pmap(
      bench::trainStep(*model, sgd),
      {.inAxes = {spmd::replicated, spmd::replicated, spmd::replicated, spmd::split, spmd::split},
       .devices = "cpu:" + std::to_string(devices)});
  auto [x, y] = bench::syntheticBatch(batch);
  auto [p1, o1, s1, l1] = step(params, opt, bnState, x, y);  // compile + first run untimed
  const double seconds = bench::timeSteps(state, step, p1, o1, s1, x, y);
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["devices"] = devices;
  bench::reportFlops(state, devices * bench::programFlops(step.lastProgram()), seconds);
}
BENCHMARK(BM_ResNet18PmapStep)
    ->ArgNames({"devices", "batch", "width"})
    ->Args({1, 64, 16})
    ->Args({2, 64, 16})
    ->Args({4, 64, 16})
    ->Args({2, 4, 2})  // compare_pmap_jax.py --smoke (CI)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(3.0);

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_resnet18_pmap_step",
                              "One width-16 ResNet-18 training step at the same global batch on cpu:1 and cpu:N: the SPMD overhead.");
}
