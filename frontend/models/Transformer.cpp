// The decoder block, unsharded or tensor-parallel (frontend/models/Transformer.h).
#include "frontend/models/Transformer.h"

#include <cmath>
#include <map>
#include <tuple>

#include "frontend/Collectives.h"
#include "frontend/Init.h"
#include "frontend/Ops.h"
#include "frontend/Remat.h"
#include "frontend/Trace.h"

namespace spmd::models {

Tensor transformerLogits(const Tree& p, const Tensor& ids, const TransformerOptions& options, Loc loc) {
  Tensor x = embedding(p.at("embed.weight", loc), ids, loc);
  const int64_t b = x.dim(0), t = x.dim(1), d = x.dim(2);
  if (options.heads < 1 || d % options.heads != 0)
    throw Error(detail::where(loc) + ": models::transformerLogits: " + std::to_string(options.heads) +
                " heads do not split the model dimension " + std::to_string(d) + "; give a divisor of it");
  const int64_t dh = d / options.heads;
  const int64_t local = p.at("q.weight", loc).dim(0) / dh;  // this replica's heads (all of them unsharded)
  const std::string& axis = options.modelAxis;
  if (options.compute != DType::f32 && options.compute != DType::bf16)
    throw Error(detail::where(loc) + ": models::transformerLogits: compute " + std::string(dtypeName(options.compute)) +
                " is not a mixed-precision dtype; give bf16, or f32 (the default) to convert nothing");
  const bool lowp = options.compute == DType::bf16;
  const DType wide = x.dtype();
  // A product in the compute dtype: its operands converted, its result read back in the block's.
  auto product = [&](const Tensor& lhs, const Tensor& rhs, const Tensor& bias, MatmulOptions how) {
    if (!lowp) return matmul(lhs, rhs, bias, how, loc);
    auto narrow = [&](const Tensor& v) { return v.defined() ? cast(v, DType::bf16, loc) : v; };
    return cast(matmul(narrow(lhs), narrow(rhs), narrow(bias), how, loc), wide, loc);
  };
  auto dense = [&](const Tensor& h, const std::string& name) {
    const Tensor& w = p.at(name + ".weight", loc);
    Tensor y = product(reshape(h, {-1, h.shape().back()}, loc), w, p.at(name + ".bias", loc), {.transposeRhs = true});
    return reshape(y, {b, t, w.dim(0)}, loc);
  };
  auto rowDense = [&](const Tensor& h, const std::string& name) {  // this replica's inputs' share, summed
    if (axis.empty()) return dense(h, name);
    const Tensor& w = p.at(name + ".weight", loc);
    Tensor y = product(reshape(h, {-1, h.shape().back()}, loc), w, {}, {.transposeRhs = true});
    return reshape(add(psum(y, axis, loc), p.at(name + ".bias", loc), loc), {b, t, w.dim(0)}, loc);
  };
  auto heads = [&](const Tensor& h) {  // [B, T, local * dh] -> [B * local, T, dh]
    return reshape(transpose(reshape(h, {b, t, local, dh}, loc), {0, 2, 1, 3}, loc), {b * local, t, dh}, loc);
  };
  Array mask = Array::zeros(x.dtype(), {t, t});  // -1e9 above the diagonal: causal
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = i + 1; j < t; ++j) {
      if (x.dtype() == DType::f64) mask.values<double>()[i * t + j] = -1e9;
      else mask.values<float>()[i * t + j] = -1e9f;
    }
  auto attention = [&](const Tensor& x) {
    Tensor h = layerNorm(x, p.at("ln1.weight", loc), p.at("ln1.bias", loc), 1e-5, loc);
    Tensor q = heads(dense(h, "q")), k = heads(dense(h, "k")), v = heads(dense(h, "v"));
    Tensor scores = add(mul(product(q, k, {}, {.transposeRhs = true}), 1.0 / std::sqrt(double(dh)), loc), Tensor(mask), loc);
    Tensor attended = product(softmax(scores, -1, loc), v, {}, {});
    attended = reshape(transpose(reshape(attended, {b, local, t, dh}, loc), {0, 2, 1, 3}, loc), {b, t, local * dh}, loc);
    return add(x, rowDense(attended, "proj"), loc);
  };
  auto mlp = [&](const Tensor& x) {
    Tensor h = layerNorm(x, p.at("ln2.weight", loc), p.at("ln2.bias", loc), 1e-5, loc);
    return add(x, rowDense(gelu(dense(h, "fc1"), loc), "fc2"), loc);
  };
  x = options.remat ? checkpoint(attention, loc)(x) : attention(x);
  x = options.remat ? checkpoint(mlp, loc)(x) : mlp(x);
  return dense(layerNorm(x, p.at("lnf.weight", loc), p.at("lnf.bias", loc), 1e-5, loc), "head");
}

Spec transformerSpec(const std::string& modelAxis) {
  std::map<std::string, PartitionSpec> leaves;
  for (const char* column : {"q", "k", "v", "fc1"}) {
    leaves[std::string(column) + ".weight"] = {modelAxis};
    leaves[std::string(column) + ".bias"] = {modelAxis};
  }
  for (const char* row : {"proj", "fc2"}) leaves[std::string(row) + ".weight"] = {"", modelAxis};
  return Spec::leaves(leaves);
}

Tree transformerInit(int64_t vocab, int64_t dim, int64_t hidden, DType dtype, uint64_t seed) {
  Tree params;
  Rng rng(seed);
  auto add = [&](const std::string& name, Shape shape, double bound, double offset = 0) {
    Array a = uniformArray(rng, shape, bound, dtype, "models::transformerInit");
    for (int64_t i = 0; i < a.numel() && offset != 0; ++i) {
      if (dtype == DType::f64) a.values<double>()[i] += offset;
      else a.values<float>()[i] += float(offset);
    }
    params.set(name, a);
  };
  add("embed.weight", {vocab, dim}, 1);
  for (const char* ln : {"ln1", "ln2", "lnf"}) {
    add(std::string(ln) + ".weight", {dim}, 0.5, 1.0);
    add(std::string(ln) + ".bias", {dim}, 0.2);
  }
  for (auto [name, out, in] : {std::tuple{"q", dim, dim}, {"k", dim, dim}, {"v", dim, dim}, {"proj", dim, dim},
                               {"fc1", hidden, dim}, {"fc2", dim, hidden}, {"head", vocab, dim}}) {
    add(std::string(name) + ".weight", {out, in}, 1 / std::sqrt(double(in)));
    add(std::string(name) + ".bias", {out}, 0.1);
  }
  return params;
}

}  // namespace spmd::models
