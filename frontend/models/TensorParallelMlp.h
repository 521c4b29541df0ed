// A two-layer MLP trained tensor-parallel (Megatron-LM's MLP: a column-parallel matmul, then a
// row-parallel one and one psum over the model axis) and data-parallel, with spmd::shardMap over
// a mesh with a "data" and a "model" axis; and the same MLP unsharded, which it matches.
//
// Parameters w1 [in, hidden], b1 [hidden], w2 [hidden, out], b2 [out]; loss: the mean over
// (batch, outputs) of (relu(x w1 + b1) w2 + b2 - y)^2; one SGD step of rate `lr`. On the mesh
// w1 is split by columns and b1, w2 by rows over "model" (each replica its own hidden units),
// b2 is whole on every replica, x and y are split by rows over "data". Each replica
// differentiates its share of the global loss (its data shard's loss over all the replicas) and
// the gradient of each parameter sums over the replicas that hold a copy of it: over "data" for
// the split ones, over both axes for b2.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

#include "frontend/Mesh.h"
#include "frontend/Tree.h"

namespace spmd::models {

// w1, b1, w2, b2 drawn uniformly (weights in +-1/sqrt(fan-in), biases in +-0.1).
Tree mlpInit(int64_t in, int64_t hidden, int64_t out, DType dtype, uint64_t seed);
Tensor mlpLoss(const Tree& params, const Tensor& x, const Tensor& y, Loc loc = Loc::current());
// One SGD step of the unsharded MLP: (the new parameters, the loss before the step).
std::tuple<Tree, Tensor> mlpStep(const Tree& params, const Tensor& x, const Tensor& y, double lr);

// The tensor-parallel step's body (one replica, inside shardMap): parts in, updated parts and the
// global loss out.
struct TensorParallelMlpBody {
  double lr;
  std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> operator()(const Tensor& w1, const Tensor& b1, const Tensor& w2,
                                                                const Tensor& b2, const Tensor& x, const Tensor& y) const;
};

// The step over `mesh` (axes "data" and "model"): step(w1, b1, w2, b2, x, y) -> (w1, b1, w2, b2,
// loss), whole tensors in and out. `pmap` gives the devices and the rest (its axisName names the
// whole mesh).
ShardMapped<TensorParallelMlpBody> tensorParallelMlp(const Mesh& mesh, double lr, PmapOptions pmap = {.axisName = "mesh"},
                                                     Loc loc = Loc::current());

}  // namespace spmd::models
