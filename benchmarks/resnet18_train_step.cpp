// Google Benchmark: one full ResNet-18 training step on the CPU backend (full width, batch 64,
// 1x28x28): forward with train-mode BN, softmax cross-entropy, backward (autodiff pass), SGD
// with momentum, new BN statistics. Compiled once by spmd::jit and then replayed.
#include <benchmark/benchmark.h>

#include "frontend/spmd.h"

namespace {

void BM_ResNet18TrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0);
  auto model = spmd::models::resnet18();
  auto [params, bnState] = model->initialize(0);
  spmd::optim::Sgd sgd({.learningRate = 0.1, .momentum = 0.9});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::jit([&](const spmd::Tree& p, const spmd::Tree& o, const spmd::Tree& s,
                            const spmd::Tensor& x, const spmd::Tensor& y) {
    auto [loss, grads, newState] = spmd::value_and_grad(
        [&](const spmd::Tree& q) {
          auto [logits, st] = model->apply(q, s, x, /*training=*/true);
          return std::pair{spmd::mean(spmd::softmaxCrossEntropy(logits, y), {0}), st};
        },
        spmd::has_aux)(p);
    auto [newParams, newOpt] = sgd.update(p, grads, o);
    return std::tuple{newParams, newOpt, newState, loss};
  });
  spmd::Rng rng(1);
  spmd::Tensor x = spmd::init::normal(1.0)(rng, {batch, 1, 28, 28});
  std::vector<int32_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10);
  spmd::Tensor y = spmd::Array::of<int32_t>({batch}, labels);
  // Trace + compile + first run outside the timing; each timed step feeds the last one's state.
  auto [p1, o1, s1, l1] = step(params, opt, bnState, x, y);
  for (auto _ : state) {
    auto [p2, o2, s2, loss] = step(p1, o1, s1, x, y);
    p1 = p2, o1 = o2, s1 = s2;
    benchmark::DoNotOptimize(loss);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_ResNet18TrainStep)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
