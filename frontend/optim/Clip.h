// Clipping by the global norm, as torch.nn.utils.clip_grad_norm_ and optax.clip_by_global_norm:
// the norm of every gradient of the tree taken together, and each gradient scaled by
// min(1, maxNorm / (norm + 1e-6)). Call it on the gradients value_and_grad returned: under pmap
// they are averaged over the replicas already there (spmd-insert-pmean), so the norm is that of
// the averaged gradient, the same on every replica, taken once.
#pragma once

#include "frontend/Tree.h"

namespace spmd::optim {

struct Clipped {
  Tree grads;
  Tensor norm;  // rank 0, the norm before clipping (clip_grad_norm_'s return value)
};

// Throws unless maxNorm is positive and finite. A non-finite norm makes every gradient NaN,
// as clip_grad_norm_ does (error_if_nonfinite=False); SPMD_DEBUG_NANS finds where it came from.
Clipped clipByGlobalNorm(const Tree& grads, double maxNorm, Loc loc = Loc::current());

}  // namespace spmd::optim
