// Google Benchmark: one training step of a message-passing graph layer on the CPU backend (a
// GraphSAGE-style layer with sum and max aggregation): messages relu(h W1) gathered at each edge's
// source (`take`), summed and max-folded into each edge's destination (`segmentSum`,
// `segmentMax`), relu(sum + max + h W2) W3 to `kClasses` logits, mean softmax cross-entropy,
// autodiff and plain SGD on the weights. `nodes` nodes, kDegree in-edges each (every node has
// some, so no segment is empty). compare_graph.py runs this beside the same step in PyTorch
// (index_select, index_add, scatter_reduce "amax").
#include <benchmark/benchmark.h>

#include <tuple>
#include <vector>

#include "BenchMain.h"

#include "frontend/spmd.h"

namespace {

constexpr int64_t kDegree = 10, kDim = 64, kClasses = 8;

void BM_GraphLayerTrainStep(benchmark::State& state) {
  const int64_t nodes = state.range(0), edges = nodes * kDegree;
  spmd::Rng rng(0);
  spmd::Tree params;
  for (const char* w : {"w1", "w2"}) params.set(w, spmd::init::normal(0.1)(rng, {kDim, kDim}));
  params.set("w3", spmd::init::normal(0.1)(rng, {kDim, kClasses}));
  spmd::optim::Sgd sgd({.learningRate = 0.1});
  spmd::Tree opt = sgd.init(params);
  auto step = spmd::jit(
      [&sgd](const spmd::Tree& p, const spmd::Tree& o, const spmd::Tensor& h, const spmd::Tensor& src,
             const spmd::Tensor& dst, const spmd::Tensor& labels) {
        const int64_t n = h.dim(0);
        auto [loss, grads] = spmd::value_and_grad([&](const spmd::Tree& q) {
          spmd::Tensor messages = spmd::take(spmd::relu(spmd::matmul(h, q.at("w1"))), src, 0);
          spmd::Tensor gathered = spmd::segmentSum(messages, dst, n) + spmd::segmentMax(messages, dst, n);
          spmd::Tensor out = spmd::relu(gathered + spmd::matmul(h, q.at("w2")));
          return spmd::mean(spmd::softmaxCrossEntropy(spmd::matmul(out, q.at("w3")), labels), {0});
        })(p);
        auto [newParams, newOpt] = sgd.update(p, grads, o);
        return std::tuple{newParams, newOpt, loss};
      },
      {.donateArguments = {0, 1}});
  // Edge i: from node i * 7919 mod nodes to node i mod nodes; labels i % classes.
  std::vector<int32_t> src(edges), dst(edges), labels(nodes);
  for (int64_t i = 0; i < edges; ++i) src[i] = int32_t(i * 7919 % nodes), dst[i] = int32_t(i % nodes);
  for (int64_t i = 0; i < nodes; ++i) labels[i] = int32_t(i % kClasses);
  spmd::Tensor h = spmd::init::normal(1.0)(rng, {nodes, kDim});
  spmd::Tensor s = spmd::Array::of<int32_t>({edges}, src), d = spmd::Array::of<int32_t>({edges}, dst);
  spmd::Tensor y = spmd::Array::of<int32_t>({nodes}, labels);
  auto [p, o, l] = step(params, opt, h, s, d, y);  // trace + compile + first step outside the timing
  for (auto _ : state) {
    std::tie(p, o, l) = step(p, o, h, s, d, y);
    benchmark::DoNotOptimize(l);
  }
  state.SetItemsProcessed(state.iterations() * edges);
}
BENCHMARK(BM_GraphLayerTrainStep)
    ->ArgNames({"nodes"})
    ->Arg(6400)
    ->Arg(200)  // the compare script's --smoke run in CI
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  return bench::benchmarkMain(argc, argv, "bench_graph_train_step",
                              "A message-passing graph layer's training step (sum and max aggregation, 10 in-edges a "
                              "node, width 64) on the CPU backend.");
}
