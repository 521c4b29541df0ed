// Module: scoping, initialization and the apply() entry point.
#include "frontend/nn/Module.h"

#include "frontend/Trace.h"

namespace spmd::nn {

Tensor Module::operator()(Context& ctx, const Tensor& x, Loc loc) const {
  detail::TraceScope scope(path_.empty() ? "model" : path_);
  return forward(ctx, x, loc);
}

std::pair<Tree, Tree> Module::initialize(uint64_t seed) const {
  Rng rng(seed);
  Tree params, state;
  init(rng, params, state);
  return {std::move(params), std::move(state)};
}

std::pair<Tensor, Tree> Module::apply(const Tree& params, const Tree& state, const Tensor& x,
                                      bool training, Loc loc) const {
  return apply(params, state, x, training, Tensor(), loc);
}

std::pair<Tensor, Tree> Module::apply(const Tree& params, const Tree& state, const Tensor& x,
                                      bool training, const Tensor& rngKey, Loc loc) const {
  return apply(params, state, x, {.training = training, .rng = rngKey}, loc);
}

std::pair<Tensor, Tree> Module::apply(const Tree& params, const Tree& state, const Tensor& x,
                                      const ApplyOptions& options, Loc loc) const {
  if (options.mask.defined() && (options.mask.rank() != 1 || x.rank() == 0 || options.mask.dim(0) != x.dim(0)))
    throw Error(detail::where(loc) + ": apply: the mask must be [N] with one entry per example of the input " +
                x.typeString() + ", got " + options.mask.typeString());
  Context ctx{params, state, options.training, {}, options.rng, options.mask};
  Tensor y = (*this)(ctx, x, loc);
  Tree newState = state;
  for (const auto& [name, value] : ctx.newState) newState.set(name, value);
  return {y, std::move(newState)};
}

std::string Module::key(const std::string& leaf) const {
  return path_.empty() ? leaf : path_ + "." + leaf;
}

}  // namespace spmd::nn
