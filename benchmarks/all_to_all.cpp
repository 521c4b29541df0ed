// Google Benchmark: allToAll on cpu:4 of each replica's [rows, 1024] f32 operand, five ways:
// split and concat along the leading axis (the chunks are the input's rows and arrive in the
// result's: each replica copies its block from every other's input and nothing else moves);
// split along the columns and concat along the rows (the chunks packed by destination first, the
// received blocks in place); and the all-gather of every replica's operand with the replica's
// chunk of each taken, which is what an all_to_all cost in one process before the communicator
// exchanged blocks (every operand copied to every replica, N times the bytes). Within the
// groups {0, 2} and {1, 3}: the all_to_all with replica groups against the all_gather within
// them and the same selection (what allToAll within groups was built of before). Each call also
// places the operands on the replicas and sums each result, the same work in every way.
#include <benchmark/benchmark.h>

#include <vector>

#include "BenchMain.h"

#include "frontend/spmd.h"

namespace {

using namespace spmd;

void BM_AllToAll(benchmark::State& state) {
  const int64_t n = 4, rows = state.range(0), width = 1024;
  const int64_t way = state.range(1);
  const char* labels[] = {"all_to_all rows to rows", "all_to_all columns to rows",
                          "all-gather of every replica, take the chunks", "all_to_all within pairs",
                          "all_gather within pairs, take the chunks"};
  state.SetLabel(labels[way]);
  const AxisGroups pairs = {{0, 2}, {1, 3}};
  // Replica r's position in its pair (r / 2), as an index.
  const Array positions = Array::of<int32_t>({n, 1}, std::vector<int32_t>{0, 0, 1, 1});
  auto f = pmap(
      [way, rows, width, n, pairs, positions](const Tensor& x) {
        Tensor y;
        if (way == 0) y = allToAll(x, "batch", 0, 0);
        else if (way == 1) y = allToAll(x, "batch", 1, 0);
        else if (way == 2)  // [n sources, n chunks, rows / n, width]: this replica's chunk of every source
          y = take(reshape(allGather(x, "batch"), {n, n, rows / n, width}), reshape(axisIndex("batch"), {1}), 1);
        else if (way == 3) y = allToAll(x, "batch", 0, 0, pairs);
        else  // [2 members, 2 chunks, rows / 2, width]: the chunk at this replica's position of each
          y = take(reshape(allGather(x, "batch", pairs), {2, 2, rows / 2, width}),
                   reshape(take(Tensor(positions), reshape(axisIndex("batch"), {1}), 0), {1}), 1);
        return sum(reshape(y, {rows * width}), {0});  // a replica's sum comes back, not its operand
      },
      {.outAxes = {0}, .devices = "cpu:4"});
  Array x = Array::zeros(DType::f32, {n, rows, width});
  for (int64_t i = 0; i < x.numel(); ++i) x.values<float>()[i] = float(i % 97) * 0.25f;
  const Tensor input(x);
  Tensor y = f(input);  // compiles
  for (auto _ : state) {
    y = f(input);
    benchmark::DoNotOptimize(y);
  }
  state.SetBytesProcessed(rows * width * 4 * int64_t(state.iterations()));  // one replica's operand a call
}
BENCHMARK(BM_AllToAll)
    ->ArgNames({"rows", "way"})
    ->ArgsProduct({{16, 256}, {0, 1, 2, 3, 4}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_all_to_all",
                              "allToAll on cpu:4: blocks exchanged alone against an all-gather of every operand.");
}
