// A small decoder block (embedding, pre-norm causal self-attention, a GELU MLP, a final layer
// norm and a linear head), unsharded or tensor-parallel over a mesh axis as Megatron-LM splits
// it: each replica holds its heads' rows of q, k, v and its hidden units' rows of fc1, and the
// matching columns of proj and fc2, whose row-parallel products sum over the axis (one psum
// after the attention, one after the MLP). tests/reference/torch_transformer.py builds the same
// block in PyTorch.
//
// Parameters (rows are output features, as torch.nn.Linear): embed.weight [vocab, dim];
// ln1/ln2/lnf.{weight,bias} [dim]; q/k/v/proj.{weight [dim, dim], bias [dim]};
// fc1 [hidden, dim] + [hidden]; fc2 [dim, hidden] + [dim]; head [vocab, dim] + [vocab].
#pragma once

#include <cstdint>
#include <string>

#include "frontend/Mesh.h"
#include "frontend/Tree.h"

namespace spmd::models {

struct TransformerOptions {
  int64_t heads = 2;
  // The attention and the MLP sublayers are each one spmd::checkpoint segment (recomputed in
  // the backward pass).
  bool remat = false;
  // Inside spmd::shardMap: the mesh axis the heads and hidden units are split over, with the
  // parameters laid out as transformerSpec says; empty: unsharded.
  std::string modelAxis = {};
  // Mixed precision, as torch.autocast(dtype=bfloat16) runs the same block: with bf16, the seven
  // linear layers and attention's two batched products take bf16 operands (the f32 parameters
  // converted as they are read: f32 master weights, f32 gradients) and give bf16 results, read
  // back as f32 (exactly); the layer norms, the softmax, GELU, the residual stream and the logits
  // stay f32. f32, the default, converts nothing (an f64 block stays f64).
  DType compute = DType::f32;
};

// Logits [batch, tokens, vocab] of i32 token ids [batch, tokens].
Tensor transformerLogits(const Tree& params, const Tensor& ids, const TransformerOptions& options = {},
                         Loc loc = Loc::current());

// How the parameters lie for tensor parallelism over `modelAxis`: q, k, v and fc1 (weights and
// biases) split by rows, proj and fc2's weights by columns, everything else whole.
Spec transformerSpec(const std::string& modelAxis);

// Parameters drawn uniformly from `seed` (weights in +-1/sqrt(fan-in), biases in +-0.1, the
// embedding in +-1, layer-norm scales in [0.5, 1.5] and offsets in +-0.2), f32 or f64.
Tree transformerInit(int64_t vocab, int64_t dim, int64_t hidden, DType dtype, uint64_t seed);

}  // namespace spmd::models
