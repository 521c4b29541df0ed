// einsum: jnp.einsum's and torch.einsum's equations, composed of transposes, sums, diagonals
// (indexGet) and one matmul per pair of operands, so every backend runs it and its gradient is
// the ops' own. Checked against torch.einsum in f64 with gradients (ComposedTorchTest).
#pragma once

#include <string>
#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// The Einstein sum `equation` of `operands` (one or more, of one float dtype): "bij,bjk->bik"
// (batched matmul), "ij->ji", "ii->i" (a diagonal), "i,i->" (a dot product), "bhqd,bhkd->bhqk",
// "...ij,...jk->...ik". A label's axes must have one size, or 1 (broadcast); "..." stands for
// the axes no label names, right-aligned and broadcast among the operands (NumPy's rules), and
// must then appear in an explicit output too (numpy's and jax's rule; torch sums them). Without
// "->", the output is "..." and then the labels used once, in ASCII order (upper case first).
// Labels in no later operand and not in the output are summed as early as they can be; the
// operands are contracted left to right, each pair as one (batched) matmul. Errors name the
// equation and the operand at the caller's line.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands, Loc loc = Loc::current());

}  // namespace spmd
