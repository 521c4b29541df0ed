// Flattening the arguments and results of traced functions (Tensor, Tree, static numbers, tuples
// and pairs of them) into tensor leaves with a structure string and a path per leaf, and rebuilding them
// from leaves: the one pytree walk of spmd::jit, spmd::pmap and spmd::value_and_grad.
#pragma once

#include <cstdio>
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

// A flattened value: its tensor leaves in order, the structure (tree keys and arity: the shape
// part of a compile-cache key) and each leaf's path for messages ("argument 2.fc.weight":
// argument, tuple element and tree key joined by dots).
struct Flat {
  std::vector<Tensor> leaves;
  std::string structure;
  std::vector<std::string> paths;
};

inline std::string joinPath(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : name.empty() ? prefix : prefix + "." + name;
}

inline void flatten(const Tensor& t, Flat& flat, const std::string& path = "") {
  flat.leaves.push_back(t);
  flat.structure += "T;";
  flat.paths.push_back(path);
}
inline void flatten(const Array& a, Flat& flat, const std::string& path = "") { flatten(Tensor(a), flat, path); }
inline Tensor unflatten(const Array&, const std::vector<Tensor>& leaves, size_t& pos) {
  return leaves.at(pos++);
}
inline void flatten(const Tree& tree, Flat& flat, const std::string& path = "") {
  flat.structure += "{";
  for (const auto& [name, t] : tree) {
    flat.leaves.push_back(t);
    flat.structure += name + ",";
    flat.paths.push_back(joinPath(path, name));
  }
  flat.structure += "};";
}
template <typename... T>
void flatten(const std::tuple<T...>& tuple, Flat& flat, const std::string& path = "") {
  size_t i = 0;
  std::apply([&](const auto&... parts) { (flatten(parts, flat, joinPath(path, std::to_string(i++))), ...); }, tuple);
}
template <typename A, typename B>
void flatten(const std::pair<A, B>& pair, Flat& flat, const std::string& path = "") {
  flatten(pair.first, flat, joinPath(path, "0"));
  flatten(pair.second, flat, joinPath(path, "1"));
}

// Static arguments: a number or bool passed to a traced function is a compile-time constant
// (jax's static_argnums). It has no leaf; its value is part of the structure, hence of the
// compile-cache key, so a new value recompiles and the reason names it. A scalar Tensor is
// traced instead: a new value then runs the same compiled code.
template <typename T>
  requires std::is_arithmetic_v<T>
std::string staticText(T value) {
  if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
  else if constexpr (std::is_floating_point_v<T>) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", double(value));
    return text;
  } else return std::to_string(value);
}
template <typename T>
  requires std::is_arithmetic_v<T>
void flatten(T value, Flat& flat, const std::string& path = "") {
  flat.structure += "static " + (path.empty() ? std::string("value") : path) + " = " + staticText(value) + ";";
}
template <typename T>
  requires std::is_arithmetic_v<T>
T unflatten(T proto, const std::vector<Tensor>&, size_t&) {
  return proto;
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
