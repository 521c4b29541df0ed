// Google Benchmark: a 3-D convolution's forward and both gradients on the CPU backend (conv3d,
// composed of the padded depth's windows stacked into channels and one conv2d): x [batch, 16,
// 16, 32, 32], a 3x3x3 filter to 32 channels, padding 1, the gradients of sum(y * g) with
// respect to x and the filter. compare_conv3d.py runs this beside torch.nn.functional.conv3d.
#include <benchmark/benchmark.h>

#include "BenchMain.h"

#include "frontend/spmd.h"

namespace {

constexpr int64_t kIn = 16, kOut = 32, kDepth = 16, kSide = 32;

void BM_Conv3dGradients(benchmark::State& state) {
  const int64_t batch = state.range(0);
  spmd::Rng rng(0);
  spmd::Tree inputs;
  inputs.set("x", spmd::init::normal(1.0)(rng, {batch, kIn, kDepth, kSide, kSide}));
  inputs.set("w", spmd::init::normal(0.1)(rng, {kOut, kIn, 3, 3, 3}));
  const spmd::Tensor g = spmd::init::normal(1.0)(rng, {batch, kOut, kDepth, kSide, kSide});
  auto step = spmd::jit([](const spmd::Tree& t, const spmd::Tensor& cotangent) {
    return spmd::grad([&](const spmd::Tree& u) {
      const spmd::Tensor y = spmd::conv3d(u.at("x"), u.at("w"), {}, {{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1});
      return spmd::sum(y * cotangent, {0, 1, 2, 3, 4});
    })(t);
  });
  spmd::Tree grads = step(inputs, g);  // trace + compile + first step outside the timing
  for (auto _ : state) {
    grads = step(inputs, g);
    benchmark::DoNotOptimize(grads);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_Conv3dGradients)
    ->ArgNames({"batch"})
    ->Arg(8)
    ->Arg(2)  // the compare script's --smoke run in CI
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_conv3d_step",
                              "A 3-D convolution's forward and both gradients (x [batch, 16, 16, 32, 32], a 3x3x3 "
                              "filter to 32 channels) on the CPU backend.");
}
