// Google Benchmark: one training step of the library's decoder block (frontend/models/
// Transformer.h: token embedding, pre-norm causal self-attention, a GELU MLP, a final layer norm
// and a linear head) as a language model on the CPU backend: next-token mean softmax
// cross-entropy, autodiff and plain SGD on every parameter, donated as a training loop does.
// compare_transformer.py runs this beside the same block in PyTorch (tests/reference/
// torch_transformer.py's, shared with TorchReferenceTest).
#include <benchmark/benchmark.h>

#include <tuple>
#include <vector>

#include "BenchMain.h"

#include "frontend/models/Transformer.h"
#include "frontend/spmd.h"

namespace {

constexpr int64_t kVocab = 4096, kDim = 256, kHidden = 1024, kHeads = 4, kTokens = 128;

void trainStep(benchmark::State& state, spmd::DType compute) {
  const int64_t batch = state.range(0);
  spmd::Tree params = spmd::models::transformerInit(kVocab, kDim, kHidden, spmd::DType::f32, 0);
  spmd::optim::Sgd sgd({.learningRate = 0.01});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::jit(
      [&sgd, compute](const spmd::Tree& p, const spmd::Tree& o, const spmd::Tensor& ids, const spmd::Tensor& next) {
        auto [loss, grads] = spmd::value_and_grad([&](const spmd::Tree& q) {
          spmd::Tensor logits = spmd::models::transformerLogits(q, ids, {.heads = kHeads, .compute = compute});
          return spmd::mean(spmd::softmaxCrossEntropy(spmd::reshape(logits, {-1, kVocab}), spmd::reshape(next, {-1})),
                            {0});
        })(p);
        auto [newParams, newOpt] = sgd.update(p, grads, o);
        return std::tuple{newParams, newOpt, loss};
      },
      {.donateArguments = {0, 1}});
  // Tokens i * 7919 mod vocab; the targets are the next position's.
  std::vector<int32_t> ids(batch * kTokens), next(batch * kTokens);
  for (int64_t i = 0; i < batch * kTokens; ++i) {
    ids[i] = static_cast<int32_t>(i * 7919 % kVocab);
    next[i] = static_cast<int32_t>((i + 1) * 7919 % kVocab);
  }
  spmd::Tensor x = spmd::Array::of<int32_t>({batch, kTokens}, ids), y = spmd::Array::of<int32_t>({batch, kTokens}, next);
  auto [p, o, l] = step(params, opt, x, y);  // trace + compile + first step outside the timing
  for (auto _ : state) {
    std::tie(p, o, l) = step(p, o, x, y);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * batch * kTokens);
}

void BM_TransformerTrainStep(benchmark::State& state) { trainStep(state, spmd::DType::f32); }
// In mixed precision (TransformerOptions::compute = bf16: the products in bf16, oneDNN's bf16
// matmuls where the CPU has AVX512-BF16 or AMX); compare_transformer.py --dtype bf16 runs it
// beside the PyTorch block under torch.autocast.
void BM_TransformerTrainStepBf16(benchmark::State& state) { trainStep(state, spmd::DType::bf16); }

BENCHMARK(BM_TransformerTrainStep)
    ->ArgNames({"batch"})
    ->Arg(16)
    ->Arg(2)  // the compare script's --smoke run in CI
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_TransformerTrainStepBf16)->ArgNames({"batch"})->Arg(16)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_transformer_train_step",
                              "A decoder block's language-model training step (vocab 4096, dim 256, 4 heads, 128 tokens) "
                              "on the CPU backend.");
}
