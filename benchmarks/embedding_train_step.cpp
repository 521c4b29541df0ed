// Google Benchmark: one training step of an embedding-bag text classifier on the CPU backend
// (fastText's shape: a [vocab, dim] table looked up at [batch, tokens] ids, the mean over the
// tokens, a linear layer to `classes` logits, mean softmax cross-entropy, autodiff and plain SGD on
// every parameter, donated as a training loop does). The table's gradient is dense, as
// torch.nn.Embedding's by default: embedding_backward writes all vocab x dim of it.
// compare_embedding.py runs this beside the same step in PyTorch.
#include <benchmark/benchmark.h>

#include <tuple>
#include <vector>

#include "BenchMain.h"

#include "frontend/spmd.h"

namespace {

constexpr int64_t kTokens = 64, kClasses = 4;

void BM_EmbeddingBagTrainStep(benchmark::State& state) {
  const int64_t batch = state.range(0), vocab = state.range(1), dim = state.range(2);
  spmd::Rng rng(0);
  spmd::Tree params;
  params.set("table", spmd::init::normal(1.0)(rng, {vocab, dim}));
  params.set("w", spmd::init::normal(0.1)(rng, {dim, kClasses}));
  params.set("b", spmd::init::normal(0.1)(rng, {kClasses}));
  spmd::optim::Sgd sgd({.learningRate = 0.1});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::jit(
      [&sgd](const spmd::Tree& p, const spmd::Tree& o, const spmd::Tensor& ids, const spmd::Tensor& labels) {
        auto [loss, grads] = spmd::value_and_grad([&](const spmd::Tree& q) {
          spmd::Tensor bag = spmd::mean(spmd::embedding(q.at("table"), ids), {1});
          return spmd::mean(spmd::softmaxCrossEntropy(spmd::matmul(bag, q.at("w"), q.at("b")), labels), {0});
        })(p);
        auto [newParams, newOpt] = sgd.update(p, grads, o);
        return std::tuple{newParams, newOpt, loss};
      },
      {.donateArguments = {0, 1}});
  // Ids spread over the vocabulary with repeats (i * 7919 mod vocab), labels i % classes.
  std::vector<int32_t> ids(batch * kTokens), labels(batch);
  for (int64_t i = 0; i < batch * kTokens; ++i) ids[i] = static_cast<int32_t>(i * 7919 % vocab);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % kClasses);
  spmd::Tensor x = spmd::Array::of<int32_t>({batch, kTokens}, ids), y = spmd::Array::of<int32_t>({batch}, labels);
  auto [p, o, l] = step(params, opt, x, y);  // trace + compile + first step outside the timing
  for (auto _ : state) {
    std::tie(p, o, l) = step(p, o, x, y);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_EmbeddingBagTrainStep)
    ->ArgNames({"batch", "vocab", "dim"})
    ->Args({64, 32000, 128})
    ->Args({2, 32000, 128})  // the compare script's --smoke run in CI
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_embedding_train_step",
                              "An embedding-bag text classifier's training step (vocab 32000, dim 128, 64 tokens) on the CPU backend.");
}
