// Google Benchmark: a psum over one axis of a mesh, {data: 2, model: 4} on cpu:8, of each
// replica's [rows, 1024] f32 block, three ways: psum(x, "data") (one all_reduce within the data
// axis' groups of 2: each replica reads its partner's block); sum(allGather(x, "data"), {0}) (the
// all_gather within those groups, then a sum); and every replica's block gathered over the whole
// mesh, the group's two rows taken and summed, which is what a reduction within groups cost
// before the collectives had replica groups. The results stay on the devices (keepOnDevices), so
// a call is the collective and its step.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "BenchMain.h"

#include "frontend/spmd.h"

namespace {

using namespace spmd;

void BM_PsumOverAMeshAxis(benchmark::State& state) {
  const int64_t rows = state.range(0), width = 1024;
  const int64_t way = state.range(1);
  state.SetLabel(way == 0 ? "all_reduce within groups" : way == 1 ? "all_gather within groups and sum"
                                                                 : "all-gather of every replica, take and sum");
  // Row r of the table: replica r's data group {r mod 4, r mod 4 + 4}, in order.
  std::vector<int32_t> table;
  for (int32_t r = 0; r < 8; ++r) table.insert(table.end(), {r % 4, r % 4 + 4});
  const Array groups = Array::of<int32_t>({8, 2}, table);
  auto f = shardMap(
      [way, groups](const Tensor& x) {
        if (way == 0) return psum(x, "data");
        if (way == 1) return sum(allGather(x, "data"), {0});
        const Tensor members = reshape(take(Tensor(groups), reshape(axisIndex("mesh"), {1}), 0), {2});
        return sum(take(allGather(x, "mesh"), members, 0), {0});
      },
      Mesh({{"data", 2}, {"model", 4}}),
      {.inSpecs = {{"data", "model"}}, .outSpecs = {{"", "model"}}, .pmap = {.axisName = "mesh", .devices = "cpu:8"},
       .keepOnDevices = true,
       .checkVaries = way != 2});  // the take by the replica's own table row is invariant, which the analysis cannot see
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
    ->ArgNames({"rows", "way"})
    ->ArgsProduct({{16, 256}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_grouped_all_reduce",
                              "psum over a mesh axis: one all_reduce within groups against an all-gather and a sum.");
}
