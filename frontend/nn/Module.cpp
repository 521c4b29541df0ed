// Module: scoping, initialization and the apply() entry point.
#include "frontend/nn/Module.h"

#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd::nn {

Tensor Module::operator()(Context& ctx, const Tensor& x, Loc loc) const {
  detail::TraceScope scope(path_.empty() ? "model" : path_);
  Tensor y = forward(ctx, x, loc);
  if (ctx.intermediates) ctx.intermediates->set(path_.empty() ? "output" : path_, y);
  return y;
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
  if (options.compute != DType::f32 && options.compute != DType::bf16)
    throw Error(detail::where(loc) + ": apply: the compute dtype must be bf16 (mixed precision) or f32 (none: every "
                "op in its operands' dtype), got " + std::string(dtypeName(options.compute)));
  if (options.intermediates) *options.intermediates = Tree();
  Context ctx{params, state, options.training, {}, options.rng, options.mask, options.compute,
              options.intermediates};
  Tensor y = (*this)(ctx, x, loc);
  if (y.dtype() == DType::bf16 && options.compute == DType::bf16)  // the output (the loss's input) in f32 or f64
    y = cast(y, x.dtype() == DType::f64 ? DType::f64 : DType::f32, loc);
  Tree newState = state;
  for (const auto& [name, value] : ctx.newState) newState.set(name, value);
  return {y, std::move(newState)};
}

Tensor Context::toCompute(const Tensor& t, Loc loc) const {
  if (compute != DType::bf16 || !t.defined() || t.dtype() == DType::bf16 || t.dtype() == DType::i32) return t;
  return cast(t, compute, loc);
}

std::string Module::key(const std::string& leaf) const {
  return path_.empty() ? leaf : path_ + "." + leaf;
}

}  // namespace spmd::nn
