// This machine's f32 peak, measured: an FMA loop over independent vector accumulators (AVX-512
// where the CPU has it, else AVX2 + FMA, else scalar) on every OpenMP thread at once. The figure
// a benchmark's FLOP/s is put beside, as a fraction of what the cores can do.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace bench {

namespace peak {

// One body per ISA (a target attribute does not reach into templates or lambdas): N
// independent accumulators, more than the FMA latency times the FMA ports, so the loop is
// bound by FMA throughput. Returns the FLOPs done (2 per lane per FMA).
#define SPMD_PEAK_LOOP(NAME, TARGET, VEC, N, LANES, SET1, FMA)                     \
  __attribute__((target(TARGET))) inline double NAME(long iterations) {            \
    VEC acc[N];                                                                    \
    for (int j = 0; j < N; ++j) acc[j] = SET1(1.f + j * 1e-3f);                   \
    const VEC scale = SET1(0.9999999f), shift = SET1(1e-7f);                       \
    for (long i = 0; i < iterations; ++i)                                          \
      for (int j = 0; j < N; ++j) acc[j] = FMA(acc[j], scale, shift);              \
    for (int j = 1; j < N; ++j) acc[0] = FMA(acc[0], scale, acc[j]);              \
    alignas(64) float out[LANES];                                                  \
    std::memcpy(out, &acc[0], sizeof(out));                                        \
    volatile float sink = out[0];                                                  \
    (void)sink;                                                                    \
    return 2.0 * LANES * N * double(iterations);                                   \
  }

inline float scalarSet1(float v) { return v; }
inline float scalarFma(float a, float b, float c) { return a * b + c; }
SPMD_PEAK_LOOP(avx512, "avx512f", __m512, 16, 16, _mm512_set1_ps, _mm512_fmadd_ps)
SPMD_PEAK_LOOP(avx2, "avx2,fma", __m256, 10, 8, _mm256_set1_ps, _mm256_fmadd_ps)
SPMD_PEAK_LOOP(scalar, "default", float, 8, 1, scalarSet1, scalarFma)
#undef SPMD_PEAK_LOOP

}  // namespace peak

struct Peak {
  double flops;       // f32 FLOP/s of every thread together
  int threads;
  std::string isa;    // "avx512f", "avx2+fma", "scalar"
};

// Whether oneDNN was capped below AVX-512 (ONEDNN_MAX_CPU_ISA / DNNL_MAX_CPU_ISA naming an AVX2 or
// SSE level): then the peak the kernels can reach is that ISA's, not the CPU's.
inline bool onednnCappedBelowAvx512() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* value = std::getenv(name);
    if (!value) continue;
    std::string isa(value);
    for (char& c : isa) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (isa.rfind("avx2", 0) == 0 || isa.rfind("sse", 0) == 0 || isa == "avx") return true;
  }
  return false;
}

// About 0.3 s: the best of three timed rounds of the loop on all OpenMP threads at once, with the
// widest FMA the CPU has, or AVX2's when oneDNN is capped to it (so "% of peak" compares like
// with like in an AVX2 run on an AVX-512 machine).
inline Peak measurePeak() {
  const bool has512 = __builtin_cpu_supports("avx512f") && !onednnCappedBelowAvx512(),
             has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  auto body = [&](long n) { return has512 ? peak::avx512(n) : has2 ? peak::avx2(n) : peak::scalar(n); };
  const long iterations = 20'000'000;
  int threads = 1;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    double flops = 0;
    auto start = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : flops)
    {
      flops += body(iterations);
#pragma omp single
      threads = omp_get_num_threads();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (flops / seconds > best) best = flops / seconds;
  }
  return {best, threads, has512 ? "avx512f" : has2 ? "avx2+fma" : "scalar"};
}

}  // namespace bench
