// Vector norms and what is made of them, as torch's: vectorNorm (torch.linalg.vector_norm,
// jnp.linalg.norm of a vector), normalize (F.normalize) and cosineSimilarity
// (F.cosine_similarity). Composed of the DSL's ops; the gradient of a norm at a zero vector is 0
// (torch's), not the 0 / 0 of the formula.
#pragma once

#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// (sum over `axes` of |x|^ord)^(1 / ord) for ord > 0 (1, 2, any other), or the largest |x|
// for ord = infinity; the axes dropped unless keepDims.
Tensor vectorNorm(const Tensor& x, std::vector<int64_t> axes, double ord = 2.0, bool keepDims = false,
                  Loc loc = Loc::current());
// x / max(||x||_p, epsilon) along `axis` (F.normalize: p = 2, axis 1, epsilon 1e-12).
Tensor normalize(const Tensor& x, double p = 2.0, int64_t axis = 1, double epsilon = 1e-12, Loc loc = Loc::current());
// sum(a / max(||a||, eps) * b / max(||b||, eps)) along `axis` (F.cosine_similarity: axis 1,
// epsilon 1e-8); a and b of one shape and float dtype.
Tensor cosineSimilarity(const Tensor& a, const Tensor& b, int64_t axis = 1, double epsilon = 1e-8,
                        Loc loc = Loc::current());

}  // namespace spmd
