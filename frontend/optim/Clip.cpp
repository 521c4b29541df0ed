// clipByGlobalNorm: sqrt of the sum over leaves of each leaf's sum of squares, then one scale.
#include "frontend/optim/Clip.h"

#include <cmath>
#include <numeric>

#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd::optim {

Clipped clipByGlobalNorm(const Tree& grads, double maxNorm, Loc loc) {
  if (!(maxNorm > 0 && std::isfinite(maxNorm)))
    throw Error(detail::where(loc) + ": optim::clipByGlobalNorm: maxNorm must be positive and finite, got " +
                std::to_string(maxNorm));
  if (grads.size() == 0)
    throw Error(detail::where(loc) + ": optim::clipByGlobalNorm: the gradient tree is empty");
  Tensor squares;
  for (const auto& [name, g] : grads) {
    std::vector<int64_t> axes(static_cast<size_t>(g.rank()));
    std::iota(axes.begin(), axes.end(), 0);
    Tensor leaf = sum(mul(g, g, loc), axes, loc);
    squares = squares.defined() ? add(squares, leaf, loc) : leaf;
  }
  Clipped out{{}, sqrt(squares, loc)};
  // min(1, maxNorm / (norm + 1e-6)), as clip_grad_norm_'s clamped coefficient.
  Tensor coefficient = div(fill(out.norm, maxNorm, loc), add(out.norm, 1e-6, loc), loc);
  coefficient = minimum(coefficient, fill(coefficient, 1.0, loc), loc);
  for (const auto& [name, g] : grads) out.grads.set(name, mul(g, coefficient, loc));
  return out;
}

}  // namespace spmd::optim
