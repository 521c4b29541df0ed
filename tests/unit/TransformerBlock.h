// The transformer block of the PyTorch comparison (tests/reference/torch_transformer.py builds the
// same), in the DSL, for TorchReferenceTest and the simulator's coverage test.
#pragma once

#include <cmath>
#include <string>
#include <tuple>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd::testing {

// A transformer block as tests/reference/torch_transformer.py builds it, in the DSL: embedding,
// pre-norm causal self-attention with 2 heads (batched matmul, softmax, an additive mask),
// a GELU MLP, residuals, a final layer norm and a linear head. `remat`: the attention and the MLP
// sublayers are each one spmd::checkpoint segment (recomputed in the backward pass).
// `modelAxis` (inside spmd::shardMap): Megatron's tensor parallelism over that mesh axis: the
// replica holds its heads' rows of q, k, v, its hidden units' rows of fc1 and their columns of
// proj and fc2 (transformerSpec), and the row-parallel proj and fc2 sum over the axis.
inline Tensor transformerLogits(const Tree& p, const Tensor& ids, int64_t heads, bool remat = false,
                                const std::string& modelAxis = "") {
  Tensor x = embedding(p.at("embed.weight"), ids);
  int64_t b = x.dim(0), t = x.dim(1), d = x.dim(2), dh = d / heads;
  const int64_t local = p.at("q.weight").dim(0) / dh;  // this replica's heads (all of them unsharded)
  auto dense = [&](const Tensor& h, const std::string& name) {
    Tensor w = p.at(name + ".weight");
    Tensor y = matmul(reshape(h, {-1, h.shape().back()}), w, p.at(name + ".bias"), {.transposeRhs = true});
    return reshape(y, {b, t, w.dim(0)});
  };
  auto rowDense = [&](const Tensor& h, const std::string& name) {  // this replica's inputs' share, summed
    if (modelAxis.empty()) return dense(h, name);
    Tensor w = p.at(name + ".weight");
    Tensor y = matmul(reshape(h, {-1, h.shape().back()}), w, {}, {.transposeRhs = true});
    return reshape(psum(y, modelAxis) + p.at(name + ".bias"), {b, t, w.dim(0)});
  };
  auto split = [&](const Tensor& h) {  // [B, T, local * dh] -> [B * local, T, dh]
    return reshape(transpose(reshape(h, {b, t, local, dh}), {0, 2, 1, 3}), {b * local, t, dh});
  };
  Array mask = Array::zeros(x.dtype(), {t, t});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < t; ++j) {
      if (x.dtype() == DType::f64) mask.values<double>()[i * t + j] = -1e9;
      else mask.values<float>()[i * t + j] = -1e9f;
    }
  auto attention = [&](const Tensor& x) {
    Tensor h = layerNorm(x, p.at("ln1.weight"), p.at("ln1.bias"));
    Tensor q = split(dense(h, "q")), k = split(dense(h, "k")), v = split(dense(h, "v"));
    Tensor scores = matmul(q, k, {}, {.transposeRhs = true}) * (1.0 / std::sqrt(double(dh))) + Tensor(mask);
    Tensor attended = matmul(softmax(scores, -1), v);
    attended = reshape(transpose(reshape(attended, {b, local, t, dh}), {0, 2, 1, 3}), {b, t, local * dh});
    return x + rowDense(attended, "proj");
  };
  auto mlp = [&](const Tensor& x) {
    Tensor h = layerNorm(x, p.at("ln2.weight"), p.at("ln2.bias"));
    return x + rowDense(gelu(dense(h, "fc1")), "fc2");
  };
  x = remat ? checkpoint(attention)(x) : attention(x);
  x = remat ? checkpoint(mlp)(x) : mlp(x);
  return dense(layerNorm(x, p.at("lnf.weight"), p.at("lnf.bias")), "head");
}

// How transformerLogits' parameters lie on a mesh for tensor parallelism over `modelAxis`: q, k,
// v and fc1 split by rows (output features: heads, hidden units), proj and fc2 by columns, the
// rest whole.
inline Spec transformerSpec(const std::string& modelAxis) {
  std::map<std::string, PartitionSpec> leaves;
  for (const char* column : {"q", "k", "v", "fc1"}) {
    leaves[std::string(column) + ".weight"] = {modelAxis};
    leaves[std::string(column) + ".bias"] = {modelAxis};
  }
  for (const char* row : {"proj", "fc2"}) leaves[std::string(row) + ".weight"] = {"", modelAxis};
  return Spec::leaves(leaves);
}

// Its parameters in f32, drawn from `seed` on: embedding [vocab, dim], three layer norms, the
// q/k/v/proj projections, the MLP (dim -> hidden -> dim) and the head.
inline Tree transformerParams(int64_t vocab, int64_t dim, int64_t hidden, uint64_t seed) {
  Tree params;
  auto add = [&](const std::string& name, Shape shape, double lo, double hi) {
    params.set(name, randomArray(DType::f32, shape, seed++, lo, hi));
  };
  add("embed.weight", {vocab, dim}, -1, 1);
  for (const char* ln : {"ln1", "ln2", "lnf"}) {
    add(std::string(ln) + ".weight", {dim}, 0.5, 1.5);
    add(std::string(ln) + ".bias", {dim}, -0.2, 0.2);
  }
  for (auto [name, out, in] : {std::tuple{"q", dim, dim}, {"k", dim, dim}, {"v", dim, dim}, {"proj", dim, dim},
                               {"fc1", hidden, dim}, {"fc2", dim, hidden}, {"head", vocab, dim}}) {
    add(std::string(name) + ".weight", {out, in}, -0.5, 0.5);
    add(std::string(name) + ".bias", {out}, -0.1, 0.1);
  }
  return params;
}

}  // namespace spmd::testing
