// spmd::customVjp: a function with the user's own gradient (jax.custom_vjp). `forward` computes
// the outputs and what the gradient needs (residuals); `backward` maps the residuals and the
// outputs' cotangents to the arguments' cotangents. grad, value_and_grad, pmap (its pmean
// insertion and replication analysis see through it), spmd::checkpoint and gradient
// accumulation use `backward` in place of differentiating `forward`; without a gradient the
// function is `forward`'s outputs.
//
//   // log(1 + exp(x)) with a gradient that stays finite where exp overflows:
//   auto softplus = spmd::customVjp(
//       [](const Tensor& x) { return std::pair{log1pExp(x), x}; },                 // outputs, residuals
//       [](const Tensor& x, const Tensor& g) { return g * sigmoid(x); });           // -> d/dx
//
// Arguments and outputs are float Tensors, Trees, or tuples / pairs of them; residuals any of
// those. With one argument `backward` returns its cotangent, with several a std::tuple of them in
// order (of each argument's structure); a default-constructed Tensor stands for zeros. Data the
// functions need but that is not differentiated (labels, masks) may be captured; a captured value
// that depends on what is differentiated is an error (its gradient would be lost): pass it as an
// argument.
#pragma once

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "frontend/Flatten.h"
#include "frontend/Grad.h"

namespace spmd {
namespace detail {

using LeafFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& arguments)>;
// Records spmd.custom_vjp over `inputs` (leaf names for errors): `forward` traces the outputs
// followed by the residuals, and sets `outputs` to how many of its leaves are outputs;
// `backward` gets the residuals then the outputs' cotangents and returns the inputs'.
// Returns the op's results (the outputs).
std::vector<Tensor> customVjpLeaves(const std::vector<Tensor>& inputs, const std::vector<std::string>& names,
                                    const LeafFunction& forward, const size_t& outputs, const LeafFunction& backward,
                                    Loc loc);

}  // namespace detail

template <typename Forward, typename Backward>
class CustomVjp {
 public:
  CustomVjp(Forward forward, Backward backward, Loc defined)
      : forward_(std::move(forward)), backward_(std::move(backward)), defined_(defined) {}

  template <typename... Args>
  auto operator()(const Args&... args) const {
    using Pair = std::decay_t<std::invoke_result_t<const Forward&, const Args&...>>;
    static_assert(detail::IsPair<Pair>::value,
                  "spmd::customVjp: the forward function must return std::pair{outputs, residuals}");
    using Out = typename Pair::first_type;
    detail::Flat in;
    size_t index = 0;
    (detail::flatten(args, in, "argument " + std::to_string(index++)), ...);
    std::shared_ptr<Pair> traced;
    size_t outputs = 0;
    auto forward = [&](const std::vector<Tensor>& leaves) {
      size_t pos = 0;
      std::tuple<Args...> arguments{detail::unflatten(args, leaves, pos)...};
      traced = std::make_shared<Pair>(std::apply(forward_, arguments));
      detail::Flat out;
      detail::flatten(traced->first, out);
      outputs = out.leaves.size();
      detail::flatten(traced->second, out);
      return out.leaves;
    };
    auto backward = [&](const std::vector<Tensor>& leaves) {
      size_t pos = 0;
      auto residuals = detail::unflatten(traced->second, leaves, pos);
      Out cotangents = detail::unflatten(traced->first, leaves, pos);
      detail::Flat grads;
      detail::flatten(backward_(residuals, cotangents), grads);
      return grads.leaves;
    };
    std::vector<Tensor> results =
        detail::customVjpLeaves(in.leaves, detail::primalNames(in), forward, outputs, backward, defined_);
    size_t pos = 0;
    return detail::unflatten(traced->first, results, pos);
  }

 private:
  Forward forward_;
  Backward backward_;
  Loc defined_;
};

template <typename Forward, typename Backward>
CustomVjp<Forward, Backward> customVjp(Forward forward, Backward backward, Loc loc = Loc::current()) {
  return CustomVjp<Forward, Backward>(std::move(forward), std::move(backward), loc);
}

}  // namespace spmd
