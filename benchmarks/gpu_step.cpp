// Google Benchmark: the ResNet-18 training step on an accelerator (default cuda:0), with the
// step replayed as graphs and without (SPMD_CUDA_GRAPHS), at the sizes a GPU is used at. Part of
// the GPU report (scripts/gpu_bundle.sh). Args: global batch, width, graphs (1/0).
//   bench_gpu_step [--devices=cuda:0] [Google Benchmark flags]
// Without a GPU it stops with the reason (exit 2); ctest runs it on `sim` at batch 2, width 8
// (--devices=sim --benchmark_filter=batch:2/width:8), so it cannot rot before the first GPU run.
// The state is donated, as the sample's step is, so its buffers stay where the graphs recorded
// them. Each row reports, from the executor's counters (runtime/exec/CallCounts.h), the graphs a
// step launched, the kernels it called and the host waits inside it, and its GFLOP/s and share of
// the device's peak (--peak-f32, --peak-bf16 TFLOP/s); a graphed step that is not
// one graph per step with no host wait fails the run (exit 1), on sim as on a GPU. A profiled row
// (BM_AcceleratorStepProfile) prints the step's per-op device-time table; a pmapped row
// (BM_AcceleratorPmapStep) runs two replicas sharing the device.
#include <benchmark/benchmark.h>

#include "BenchMain.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "FlopCounters.h"
#include "TrainStep.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"

namespace {

std::string devices = "cuda:0";
bool failed = false;  // a row whose step did not run as it should (see the header)
// The device's dense peaks, TFLOP/s (an H100's or H200's by default), for each row's share.
double peakF32 = 66.9, peakBf16 = 989.4;

// GFLOP/s of the row's steps (convolutions counted as direct ones and matmuls, benchmarks/Flops.h;
// `flops` a step, over all replicas) and their share of the f32 or bf16 peak.
void reportPeakShare(benchmark::State& state, double flops, double seconds, bool bf16) {
  const double achieved = flops * double(state.iterations()) / seconds;
  state.counters["GFLOP_s"] = achieved / 1e9;
  state.counters["peak_pct"] = 100.0 * achieved / ((bf16 ? peakBf16 : peakF32) * 1e12);
}

// The donated ResNet-18 training step on `devices`, after its first (compiling) call.
struct DonatedStep {
  decltype(spmd::models::resnet18({})) model;
  spmd::optim::Sgd sgd{{.learningRate = 0.1, .momentum = 0.9}};
  decltype(spmd::jit(bench::trainStep(*model, sgd), {})) step;
  spmd::Tree params, opt, state;
  spmd::Tensor x, y;
  DonatedStep(int64_t batch, int64_t width, spmd::DType compute = spmd::DType::f32)
      : model(spmd::models::resnet18({.width = width, .bnAxisName = ""})),
        step(spmd::jit(bench::trainStep(*model, sgd, compute), {.devices = devices, .donateArguments = {0, 1, 2}})) {
    auto [p, s] = model->initialize(0);
    std::tie(x, y) = bench::syntheticBatch(batch);
    spmd::Tensor loss;
    std::tie(params, opt, state, loss) = step(p, sgd.init(p), s, x, y);
  }
  // One step on the state of the last; the loss read on the host (the step finished).
  float next() {
    auto [p, o, s, loss] = step(params, opt, state, x, y);
    params = p, opt = o, state = s;
    return loss.array().values<float>()[0];
  }
};

void BM_AcceleratorTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0), width = state.range(1);
  const bool graphs = state.range(2) != 0, bf16 = state.range(3) != 0;
  setenv("SPMD_CUDA_GRAPHS", graphs ? "1" : "0", 1);  // read when the step's executor is made
  // The first call compiles, the second records the graphs: both outside the timing.
  DonatedStep run(batch, width, bf16 ? spmd::DType::bf16 : spmd::DType::f32);
  const double compileSeconds = run.step.lastCompileSeconds();
  run.next();
  spmd::runtime::CallCounts total;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    benchmark::DoNotOptimize(run.next());
    total += run.step.lastCall();
  }
  reportPeakShare(state, bench::programFlops(run.step.lastProgram()), bench::secondsSince(start), bf16);
  unsetenv("SPMD_CUDA_GRAPHS");
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["compile_s"] = compileSeconds;
  const double steps = double(std::max<int64_t>(state.iterations(), 1));
  state.counters["graph_launches"] = double(total.graphLaunches) / steps;
  state.counters["kernels_called"] = double(total.stepsCalled) / steps;
  state.counters["host_waits"] = double(total.hostWaitsInSteps) / steps;
  if (total.hostWaitsInSteps != 0 || (graphs && (total.graphLaunches != state.iterations() || total.stepsCalled != 0))) {
    failed = true;
    state.SkipWithError(("the step is not one graph without host waits: " + std::to_string(total.graphLaunches) +
                         " graphs, " + std::to_string(total.stepsCalled) + " kernels called, " +
                         std::to_string(total.hostWaitsInSteps) + " host waits over " +
                         std::to_string(state.iterations()) + " steps")
                            .c_str());
  }
  state.SetLabel(devices + (bf16 ? ", bf16 mixed precision (" + spmd::bf16KernelPath(devices) + ")" : ""));
}
// bf16: mixed precision as the sample's --precision bf16 (bf16 activations, convolutions and
// matmuls in the backend's bf16 kernels; f32 parameters, BatchNorm statistics and loss), beside
// PyTorch's bf16 autocast rows.
BENCHMARK(BM_AcceleratorTrainStep)
    ->ArgNames({"batch", "width", "graphs", "bf16"})
    ->Args({64, 64, 1, 0})
    ->Args({64, 64, 0, 0})
    ->Args({256, 64, 1, 0})
    ->Args({256, 64, 0, 0})
    ->Args({1024, 64, 1, 0})
    ->Args({64, 64, 1, 1})
    ->Args({256, 64, 1, 1})
    ->Args({2, 8, 1, 0})  // ctest's smoke run on sim
    ->Args({2, 8, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The step pmapped over `replicas` replicas sharing the device (cuda:0*2, sim:2), the global
// batch split over them, BatchNorm per replica, the state donated: their gradients are
// all-reduced in the process and the replicas meet on the device (runtime/kernels/Collectives.h),
// so each replica's step is one graph with no host wait (the row fails otherwise). Counters per
// step, over the replicas.
void BM_AcceleratorPmapStep(benchmark::State& state) {
  const int64_t batch = state.range(0), width = state.range(1), replicas = state.range(2);
  const std::string list = devices.rfind("sim", 0) == 0 ? "sim:" + std::to_string(replicas)
                                                         : devices + "*" + std::to_string(replicas);
  setenv("SPMD_CUDA_GRAPHS", "1", 1);  // read when the replicas' executors are made
  auto model = spmd::models::resnet18({.width = width, .bnAxisName = ""});
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  auto step = spmd::pmap(bench::trainStep(*model, sgd),
                         {.inAxes = {spmd::replicated, spmd::replicated, spmd::replicated, spmd::split, spmd::split},
                          .devices = list,
                          .donateArguments = {0, 1, 2}});
  auto [p, s] = model->initialize(0);
  auto [x, y] = bench::syntheticBatch(batch);
  spmd::Tree params, opt, bn;
  spmd::Tensor loss;
  std::tie(params, opt, bn, loss) = step(p, sgd.init(p), s, x, y);  // compiles
  std::tie(params, opt, bn, loss) = step(params, opt, bn, x, y);    // records the graphs
  spmd::runtime::CallCounts total;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    std::tie(params, opt, bn, loss) = step(params, opt, bn, x, y);
    benchmark::DoNotOptimize(loss.array().values<float>()[0]);
    total += step.lastCall();
  }
  reportPeakShare(state, double(replicas) * bench::programFlops(step.lastProgram()), bench::secondsSince(start), false);
  unsetenv("SPMD_CUDA_GRAPHS");
  state.SetItemsProcessed(state.iterations() * batch);
  const double steps = double(std::max<int64_t>(state.iterations(), 1));
  state.counters["graph_launches"] = double(total.graphLaunches) / steps;
  state.counters["kernels_called"] = double(total.stepsCalled) / steps;
  state.counters["host_waits"] = double(total.hostWaitsInSteps) / steps;
  if (total.hostWaitsInSteps != 0 || total.graphLaunches != state.iterations() * replicas || total.stepsCalled != 0) {
    failed = true;
    state.SkipWithError(("each replica's step is not one graph without host waits: " +
                         std::to_string(total.graphLaunches) + " graphs, " + std::to_string(total.stepsCalled) +
                         " kernels called, " + std::to_string(total.hostWaitsInSteps) + " host waits over " +
                         std::to_string(state.iterations()) + " steps of " + std::to_string(replicas) + " replicas")
                            .c_str());
  }
  state.SetLabel(list);
}
BENCHMARK(BM_AcceleratorPmapStep)
    ->ArgNames({"batch", "width", "replicas"})
    ->Args({256, 64, 2})
    ->Args({2, 8, 2})  // ctest's smoke run on sim
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The step's device profile (SPMD_PROFILE=kernels, runtime/exec/Executor.h): each step timed on
// the device's own clock (CUDA events; sim's stream), by op and step with its GB/s and GFLOP/s,
// and each kernel the steps launch (BatchNorm's slice sums, folds and apply passes, cuDNN's
// calls), printed to stderr when the step's executor goes, after the iterations (the first call,
// which prepares every kernel, is not profiled). Graphs are off while profiling, so the times
// include the gaps between launches.
void BM_AcceleratorStepProfile(benchmark::State& state) {
  const int64_t batch = state.range(0), width = state.range(1);
  setenv("SPMD_PROFILE", "kernels", 1);  // read when the step's executor is made
  {
    DonatedStep run(batch, width);
    for (auto _ : state) benchmark::DoNotOptimize(run.next());
  }  // the executor goes: its profile is printed
  unsetenv("SPMD_PROFILE");
  state.SetLabel(devices + ", profiled");
}
BENCHMARK(BM_AcceleratorStepProfile)
    ->ArgNames({"batch", "width"})
    ->Args({256, 64})
    ->Args({2, 8})  // ctest's smoke run on sim
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  const int status = bench::benchmarkMain(
      argc, argv, "bench_gpu_step",
      "The full-width ResNet-18 training step on an accelerator at batch 64, 256 and 1024, CUDA graphs on and off.",
      [](spmd::cli::Flags& app) {
        app.text("--devices", devices, "the device to run on (sim runs the same code)", "DEVICE");
        app.number("--peak-f32", peakF32, 1e-3, 1e6, "the device's dense f32 TFLOP/s (the rows' peak_pct)");
        app.number("--peak-bf16", peakBf16, 1e-3, 1e6, "the device's dense bf16 TFLOP/s (bf16 rows)");
      },
      [] {
        try {
          spmd::runtime::parseDeviceList(devices);  // says what is wrong: no GPU, no driver, a bad form
          return 0;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench_gpu_step: --devices=%s: %s\n", devices.c_str(), e.what());
          return 2;
        }
      });
  return status != 0 ? status : failed ? 1 : 0;
}
