// Google Benchmark: the CPU matmul's variants (runtime/cpu/CpuVariants.h: `own`, `onednn`,
// `onednn_sliced`) called directly, each on the f32 matmul shapes of the transformer language-model
// step (bench_transformer_train_step: 16 x 128 tokens, dim 256, MLP 1024, vocab 4096), with the
// threads of the process (OMP_NUM_THREADS). Counter GFLOPs: 2 M N K per call. The step's timing
// chooses among these per shape; this shows each one's speed on its own.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "BenchMain.h"

#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/OwnGemm.h"
#include "runtime/cpu/SlicedOnednn.h"
#include "runtime/device/Kernel.h"
#include "runtime/program/OpAttrs.h"
#include "runtime/program/Program.h"

namespace {

using namespace spmd::runtime;

struct Shape {
  const char* name;
  int64_t m, n, k;
  bool transposeLhs, transposeRhs;
};

// The step's matmuls (forward, then the gradients' transposed forms).
const Shape kShapes[] = {{"head_forward", 2048, 4096, 256, false, true},
                         {"head_input_grad", 2048, 256, 4096, false, false},
                         {"head_weight_grad", 4096, 256, 2048, true, false},
                         {"mlp_up_forward", 2048, 1024, 256, false, true},
                         {"mlp_up_weight_grad", 1024, 256, 2048, true, false},
                         {"mlp_down_weight_grad", 256, 1024, 2048, true, false},
                         {"attention_projection", 2048, 256, 256, false, true}};

struct Variant {
  const char* name;
  KernelFn fn;
};
const Variant kVariants[] = {{"own", &cpu::own_gemm::matmul}, {"onednn", &cpu::onednnMatmul},
                             {"onednn_sliced", &cpu::sliced::matmul}};

void BM_Matmul(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  const Variant& v = kVariants[state.range(1)];
  state.SetLabel(std::string(s.name) + " " + v.name);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
  for (float& x : a) x = uniform(rng);
  for (float& x : b) x = uniform(rng);
  const std::vector<int64_t> aShape = s.transposeLhs ? std::vector<int64_t>{s.k, s.m} : std::vector<int64_t>{s.m, s.k};
  const std::vector<int64_t> bShape = s.transposeRhs ? std::vector<int64_t>{s.n, s.k} : std::vector<int64_t>{s.k, s.n};
  const std::vector<int64_t> cShape{s.m, s.n};
  Step step{"matmul", {}, {}, {{"transpose_lhs", s.transposeLhs}, {"transpose_rhs", s.transposeRhs}}, "bench_matmul"};
  decodeAttributes(step);
  const std::vector<TensorView> in{{a.data(), spmd::DType::f32, aShape}, {b.data(), spmd::DType::f32, bShape}};
  const std::vector<TensorView> out{{c.data(), spmd::DType::f32, cShape}};
  std::shared_ptr<void> cache;
  KernelCall call{step, in, out, cache};
  v.fn(call);  // builds and caches oneDNN's primitive, grows our scratch
  for (auto _ : state) {
    v.fn(call);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * s.m * s.n * s.k * double(state.iterations()),
                                                benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Matmul)
    ->ArgNames({"shape", "variant"})
    ->ArgsProduct({benchmark::CreateDenseRange(0, std::size(kShapes) - 1, 1), {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_matmul",
                              "The CPU matmul's variants (own, onednn, onednn_sliced) on the transformer step's shapes.");
}
