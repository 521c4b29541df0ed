// Google Benchmark: a psum over one axis of a mesh, {data: 2, model: 4} on cpu:8, of each
// replica's [rows, 1024] f32 block: psum(x, "data") (one all_reduce within the data axis' groups
// of 2: each replica reads its partner's block) against the same sum through an all-gather
// (sum(allGather(x, "data"), {0}): every replica's block gathered first, then the group's rows
// selected and added, which is what a reduction within groups cost before it had replica groups).
// The results stay on the devices (keepOnDevices), so a call is the collective and its step.
#include <benchmark/benchmark.h>

#include <string>

#include "BenchMain.h"

#include "frontend/spmd.h"

namespace {

using namespace spmd;

void BM_PsumOverAMeshAxis(benchmark::State& state) {
  const int64_t rows = state.range(0), width = 1024;
  const bool gathered = state.range(1) != 0;
  state.SetLabel(gathered ? "all-gather and sum" : "all_reduce within groups");
  auto f = shardMap(
      [gathered](const Tensor& x) { return gathered ? sum(allGather(x, "data"), {0}) : psum(x, "data"); },
      Mesh({{"data", 2}, {"model", 4}}),
      {.inSpecs = {{"data", "model"}}, .outSpecs = {{"", "model"}}, .pmap = {.axisName = "mesh", .devices = "cpu:8"},
       .keepOnDevices = true});
  Array x = Array::zeros(DType::f32, {2 * rows, 4 * width});
  for (int64_t i = 0; i < x.numel(); ++i) x.values<float>()[i] = float(i % 97) * 0.25f;
  const Tensor input(x);
  Tensor y = f(input);  // compiles, and places x on the mesh once
  for (auto _ : state) {
    y = f(input);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(rows * width * 4 * int64_t(state.iterations()));  // one replica's operand a call
}
BENCHMARK(BM_PsumOverAMeshAxis)
    ->ArgNames({"rows", "gathered"})
    ->ArgsProduct({{16, 256}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_grouped_all_reduce",
                              "psum over a mesh axis: one all_reduce within groups against an all-gather and a sum.");
}
