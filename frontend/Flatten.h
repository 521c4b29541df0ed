// Flattening the arguments and results of traced functions (Tensor, Tree, tuples and pairs of
// them) into a list of tensor leaves plus a structure string, and rebuilding them from leaves.
// Used by spmd::jit and spmd::value_and_grad.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/Tree.h"

namespace spmd::detail {

// What the traced function receives for an argument of type T: host Arrays become Tensors.
template <typename T> struct TracedType { using type = T; };
template <> struct TracedType<Array> { using type = Tensor; };
template <typename T> using Traced_t = typename TracedType<T>::type;

inline void flatten(const Array& a, std::vector<Tensor>& leaves, std::string& structure) {
  leaves.push_back(Tensor(a));
  structure += "T;";
}
inline Tensor unflatten(const Array&, const std::vector<Tensor>& leaves, size_t& pos) {
  return leaves.at(pos++);
}

inline void flatten(const Tensor& t, std::vector<Tensor>& leaves, std::string& structure) {
  leaves.push_back(t);
  structure += "T;";
}
inline void flatten(const Tree& tree, std::vector<Tensor>& leaves, std::string& structure) {
  structure += "{";
  for (const auto& [name, t] : tree) {
    leaves.push_back(t);
    structure += name + ",";
  }
  structure += "};";
}
template <typename... T>
void flatten(const std::tuple<T...>& tuple, std::vector<Tensor>& leaves, std::string& structure) {
  std::apply([&](const auto&... parts) { (flatten(parts, leaves, structure), ...); }, tuple);
}
template <typename A, typename B>
void flatten(const std::pair<A, B>& pair, std::vector<Tensor>& leaves, std::string& structure) {
  flatten(pair.first, leaves, structure);
  flatten(pair.second, leaves, structure);
}

inline Tensor unflatten(const Tensor&, const std::vector<Tensor>& leaves, size_t& pos) {
  return leaves.at(pos++);
}
inline Tree unflatten(const Tree& proto, const std::vector<Tensor>& leaves, size_t& pos) {
  Tree tree;
  for (const auto& [name, _] : proto) tree.set(name, leaves.at(pos++));
  return tree;
}
template <typename... T>
std::tuple<T...> unflatten(const std::tuple<T...>& proto, const std::vector<Tensor>& leaves,
                           size_t& pos) {
  return std::apply(
      [&](const auto&... parts) { return std::tuple<T...>{unflatten(parts, leaves, pos)...}; },
      proto);
}
template <typename A, typename B>
std::pair<A, B> unflatten(const std::pair<A, B>& proto, const std::vector<Tensor>& leaves,
                          size_t& pos) {
  A first = unflatten(proto.first, leaves, pos);
  return {std::move(first), unflatten(proto.second, leaves, pos)};
}

// What f returns when called on the traced forms of Args.
template <typename F, typename... Args>
using Result_t = std::decay_t<std::invoke_result_t<F&, const Traced_t<Args>&...>>;

// Calls f on traced arguments rebuilt from `traced` leaves with the structure of `args`; the
// result lives on the heap, as the prototype a compiled function rebuilds its outputs from.
template <typename F, typename... Args>
std::shared_ptr<Result_t<F, Args...>> callTraced(F& f, const std::vector<Tensor>& traced,
                                                 const Args&... args) {
  size_t pos = 0;
  std::tuple<Traced_t<Args>...> tracedArgs{unflatten(args, traced, pos)...};
  return std::make_shared<Result_t<F, Args...>>(std::apply(f, tracedArgs));
}

// The output leaves as values of the prototype's type (the structure of the traced result).
template <typename Out>
Out rebuild(const std::shared_ptr<void>& prototype, const std::vector<Tensor>& leaves) {
  size_t pos = 0;
  return unflatten(*static_cast<const Out*>(prototype.get()), leaves, pos);
}

}  // namespace spmd::detail
