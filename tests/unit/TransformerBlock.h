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
inline Tensor transformerLogits(const Tree& p, const Tensor& ids, int64_t heads, bool remat = false) {
  Tensor x = embedding(p.at("embed.weight"), ids);
  int64_t b = x.dim(0), t = x.dim(1), d = x.dim(2), dh = d / heads;
  auto dense = [&](const Tensor& h, const std::string& name) {
    Tensor w = p.at(name + ".weight");
    Tensor y = matmul(reshape(h, {-1, h.shape().back()}), w, p.at(name + ".bias"), {.transposeRhs = true});
    return reshape(y, {b, t, w.dim(0)});
  };
  auto split = [&](const Tensor& h) {  // [B, T, D] -> [B * heads, T, D / heads]
    return reshape(transpose(reshape(h, {b, t, heads, dh}), {0, 2, 1, 3}), {b * heads, t, dh});
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
    attended = reshape(transpose(reshape(attended, {b, heads, t, dh}), {0, 2, 1, 3}), {b, t, d});
    return x + dense(attended, "proj");
  };
  auto mlp = [&](const Tensor& x) {
    Tensor h = layerNorm(x, p.at("ln2.weight"), p.at("ln2.bias"));
    return x + dense(gelu(dense(h, "fc1")), "fc2");
  };
  x = remat ? checkpoint(attention)(x) : attention(x);
  x = remat ? checkpoint(mlp)(x) : mlp(x);
  return dense(layerNorm(x, p.at("lnf.weight"), p.at("lnf.bias")), "head");
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
