// The transformer block of the PyTorch comparison (tests/reference/torch_transformer.py builds the
// same), in the DSL, for TorchReferenceTest and the simulator's coverage test.
#pragma once

#include <string>
#include <tuple>

#include "TestUtil.h"
#include "frontend/models/Transformer.h"
#include "frontend/spmd.h"

namespace spmd::testing {

// The library's block (frontend/models/Transformer.h); `remat` and `modelAxis` as its options.
inline Tensor transformerLogits(const Tree& p, const Tensor& ids, int64_t heads, bool remat = false,
                                const std::string& modelAxis = "") {
  return models::transformerLogits(p, ids, {.heads = heads, .remat = remat, .modelAxis = modelAxis});
}

using models::transformerSpec;

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
