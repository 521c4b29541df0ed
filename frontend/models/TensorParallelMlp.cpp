// The tensor-parallel MLP and its unsharded twin (frontend/models/TensorParallelMlp.h).
#include "frontend/models/TensorParallelMlp.h"

#include <cmath>

#include "frontend/Grad.h"
#include "frontend/Init.h"
#include "frontend/Ops.h"

namespace spmd::models {
namespace {

Tree sgd(const Tree& params, const Tree& grads, double lr) {
  Tree out;
  for (const auto& [name, t] : params) out.set(name, t - grads.at(name) * lr);
  return out;
}

}  // namespace

Tree mlpInit(int64_t in, int64_t hidden, int64_t out, DType dtype, uint64_t seed) {
  Tree p;
  Rng rng(seed);
  const char* what = "models::mlpInit";
  p.set("w1", uniformArray(rng, {in, hidden}, 1 / std::sqrt(double(in)), dtype, what));
  p.set("b1", uniformArray(rng, {hidden}, 0.1, dtype, what));
  p.set("w2", uniformArray(rng, {hidden, out}, 1 / std::sqrt(double(hidden)), dtype, what));
  p.set("b2", uniformArray(rng, {out}, 0.1, dtype, what));
  return p;
}

Tensor mlpLoss(const Tree& p, const Tensor& x, const Tensor& y, Loc loc) {
  Tensor e = sub(add(matmul(relu(add(matmul(x, p.at("w1"), {}, {}, loc), p.at("b1"), loc), loc), p.at("w2"), {}, {}, loc),
                     p.at("b2"), loc),
                 y, loc);
  return mean(mul(e, e, loc), {0, 1}, loc);
}

std::tuple<Tree, Tensor> mlpStep(const Tree& params, const Tensor& x, const Tensor& y, double lr) {
  auto [loss, grads] = value_and_grad([&](const Tree& q) { return mlpLoss(q, x, y); })(params);
  return {sgd(params, grads, lr), loss};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> TensorParallelMlpBody::operator()(
    const Tensor& w1, const Tensor& b1, const Tensor& w2, const Tensor& b2, const Tensor& x, const Tensor& y) const {
  Tree p;
  p.set("w1", w1), p.set("b1", b1), p.set("w2", w2), p.set("b2", b2);
  const double replicas = double(axisSize("data") * axisSize("model"));
  auto [share, g] = value_and_grad([&](const Tree& q) {
    Tensor partial = matmul(relu(matmul(x, q.at("w1")) + q.at("b1")), q.at("w2"));  // this replica's hidden units
    Tensor e = psum(partial, "model") + q.at("b2") - y;
    return mean(e * e, {0, 1}) / replicas;
  })(p);
  Tree grads;
  for (const char* split : {"w1", "b1", "w2"}) grads.set(split, psum(g.at(split), "data"));
  grads.set("b2", psum(psum(g.at("b2"), "data"), "model"));
  Tree next = sgd(p, grads, lr);
  return {next.at("w1"), next.at("b1"), next.at("w2"), next.at("b2"), psum(psum(share, "data"), "model")};
}

ShardMapped<TensorParallelMlpBody> tensorParallelMlp(const Mesh& mesh, double lr, PmapOptions pmap, Loc loc) {
  return shardMap(TensorParallelMlpBody{lr}, mesh,
                  {.inSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {"data"}, {"data"}},
                   .outSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {}},
                   .pmap = std::move(pmap)},
                  loc);
}

}  // namespace spmd::models
