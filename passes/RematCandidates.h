// The segments spmd-mark-remat may make checkpoint segments (spmd.remat): runs of consecutive
// forward ops in a value_and_grad body that belong to one layer at a given depth of its nn path
// ("stage2.0" for depth 2: a residual block with its convolutions, norms and activations), with
// the bytes of the values they define before their last op, which recomputing them frees from
// the forward pass to the backward pass (an estimate: what the backward pass reads of them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlir/IR/Operation.h"

namespace spmd::passes {

struct RematCandidate {
  std::string layer;                   // the path prefix the ops share
  std::vector<mlir::Operation*> ops;   // in block order
  int64_t bytes = 0;                   // what the forward pass would no longer keep
};

// In block order, over every value_and_grad body under `root`; ops the user already marked
// (spmd::checkpoint) are in none.
std::vector<RematCandidate> rematCandidates(mlir::Operation* root, int depth = 2);

}  // namespace spmd::passes
