// Google Benchmark counters for the distance to the limit: GFLOP/s achieved (benchmarks/Flops.h
// counts) and that as a percentage of this machine's measured f32 peak (benchmarks/Peak.h),
// the peak measured once per process and printed with the threads and ISA it used.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>

#include "Flops.h"
#include "Peak.h"

namespace bench {

inline const Peak& machinePeak() {
  static const Peak peak = [] {
    Peak p = measurePeak();
    std::fprintf(stderr, "f32 peak: %.1f GFLOP/s measured (%d threads, %s FMA loop)\n", p.flops / 1e9, p.threads,
                 p.isa.c_str());
    return p;
  }();
  return peak;
}

// `flops` per iteration of the benchmark's loop, which took `seconds` (timed around it, as the
// counters are plain numbers: "GFLOP_s=441.9 peak_pct=82.2").
inline void reportFlops(benchmark::State& state, double flops, double seconds) {
  const double achieved = flops * double(state.iterations()) / seconds;
  state.counters["GFLOP_s"] = achieved / 1e9;
  state.counters["peak_pct"] = 100.0 * achieved / machinePeak().flops;
}

// Seconds since `start`, for reportFlops.
inline double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The benchmark's loop over a training step (bench::trainStep's signature) whose state is donated:
// each step takes the last one's parameters, optimizer and BN state. Returns the loop's seconds.
template <class Step, class Tree, class Tensor>
double timeSteps(benchmark::State& state, Step& step, Tree params, Tree opt, Tree bnState, const Tensor& x,
                 const Tensor& y) {
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto [p, o, s, loss] = step(params, opt, bnState, x, y);
    params = p, opt = o, bnState = s;
    benchmark::DoNotOptimize(loss);
  }
  return secondsSince(start);
}

}  // namespace bench
