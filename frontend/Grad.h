// spmd::grad and spmd::value_and_grad: reverse-mode derivatives of a scalar loss with respect
// to a Tensor or a Tree of parameters, as in JAX. Inside a traced function they record an
// `spmd.value_and_grad` op whose body is the loss function; the compiler's autodiff pass turns
// it into forward and backward ops. Tensors the loss function captures (inputs, labels, BN
// state) are constants to the derivative.
//
//   auto [loss, grads] = spmd::value_and_grad(lossFn)(params);
//   auto [loss, grads, aux] = spmd::value_and_grad(lossWithAux, spmd::has_aux)(params);
//   Tree grads = spmd::grad(lossFn)(params);
#pragma once

#include <functional>
#include <memory>
#include <type_traits>

#include "frontend/Flatten.h"

namespace spmd {

// Tag: the function returns std::pair{loss, aux}; aux is passed through undifferentiated.
struct HasAux {};
inline constexpr HasAux has_aux{};

namespace detail {

using GradBody = std::function<std::vector<Tensor>(const std::vector<Tensor>& arguments)>;

// Records spmd.value_and_grad over `primals` (leaf names for errors); `body` traces the loss
// function. Returns the body's outputs followed by one gradient per primal.
std::vector<Tensor> valueAndGradLeaves(const std::vector<Tensor>& primals,
                                       const std::vector<std::string>& names,
                                       const GradBody& body, Loc loc);

// How errors name a primal: "the argument" (a Tensor), or the tree key in quotes.
inline std::vector<std::string> primalNames(const Flat& flat) {
  std::vector<std::string> names;
  for (const std::string& path : flat.paths) names.push_back(path.empty() ? "the argument" : "'" + path + "'");
  return names;
}

template <typename T> struct IsPair : std::false_type {};
template <typename A, typename B> struct IsPair<std::pair<A, B>> : std::true_type {};

}  // namespace detail

template <typename F, bool Aux>
class ValueAndGrad {
 public:
  explicit ValueAndGrad(F f) : f_(std::move(f)) {}

  // Returns {loss, grads}, or {loss, grads, aux} with has_aux; grads has params' structure.
  template <typename P>
  auto operator()(const P& params, Loc loc = Loc::current()) const {
    static_assert(std::is_same_v<P, Tensor> || std::is_same_v<P, Tree>,
                  "spmd::value_and_grad differentiates with respect to a Tensor or a Tree");
    using Out = std::decay_t<std::invoke_result_t<const F&, const P&>>;
    if constexpr (Aux)
      static_assert(detail::IsPair<Out>::value &&
                        std::is_same_v<std::decay_t<decltype(std::declval<Out>().first)>, Tensor>,
                    "with spmd::has_aux the function must return std::pair{loss, aux}");
    else
      static_assert(std::is_same_v<Out, Tensor>,
                    "the function must return the loss as a Tensor (use spmd::has_aux to "
                    "return std::pair{loss, aux})");
    detail::Flat primals;
    detail::flatten(params, primals);
    std::shared_ptr<Out> out;
    auto body = [&](const std::vector<Tensor>& arguments) {
      size_t pos = 0;
      out = std::make_shared<Out>(f_(detail::unflatten(params, arguments, pos)));
      detail::Flat outputs;
      detail::flatten(*out, outputs);
      return outputs.leaves;
    };
    std::vector<Tensor> results =
        detail::valueAndGradLeaves(primals.leaves, detail::primalNames(primals), body, loc);
    size_t pos = 0;
    Out values = detail::unflatten(*out, results, pos);
    P grads = detail::unflatten(params, results, pos);
    if constexpr (Aux)
      return std::tuple{values.first, grads, values.second};
    else
      return std::pair{values, grads};
  }

 private:
  F f_;
};

template <typename F>
ValueAndGrad<F, false> value_and_grad(F f) { return ValueAndGrad<F, false>(std::move(f)); }
template <typename F>
ValueAndGrad<F, true> value_and_grad(F f, HasAux) { return ValueAndGrad<F, true>(std::move(f)); }

// Just the gradient (with has_aux: {grads, aux}).
template <typename F, bool Aux>
class Grad {
 public:
  explicit Grad(F f) : inner_(std::move(f)) {}
  template <typename P>
  auto operator()(const P& params, Loc loc = Loc::current()) const {
    auto result = inner_(params, loc);
    if constexpr (Aux)
      return std::pair{std::get<1>(result), std::get<2>(result)};
    else
      return result.second;
  }

 private:
  ValueAndGrad<F, Aux> inner_;
};

template <typename F>
Grad<F, false> grad(F f) { return Grad<F, false>(std::move(f)); }
template <typename F>
Grad<F, true> grad(F f, HasAux) { return Grad<F, true>(std::move(f)); }

}  // namespace spmd
