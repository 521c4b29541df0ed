// Trees in tests: mapping every tensor, Kaiming-scale parameters for a model, and the relative
// error of one tree against another that the equivalence tests bound.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "TestUtil.h"
#include "frontend/spmd.h"

namespace spmd::testing {

inline Tree mapTree(const Tree& tree, const std::function<Array(const std::string&, const Array&)>& fn) {
  Tree out;
  for (const auto& [name, t] : tree) out.set(name, fn(name, t.array()));
  return out;
}

// The model's parameters at Kaiming scale (weights uniform in +-sqrt(3 / fan-in), the rest in
// +-0.1, seeded by name) and its state, in `dtype`: every layer carries signal and gradient.
inline std::pair<Tree, Tree> kaimingInit(const nn::Module& model, DType dtype) {
  auto [params, state] = model.initialize(7);
  params = mapTree(params, [&](const std::string& name, const Array& a) {
    const bool weight = name.find("weight") != std::string::npos && a.shape.size() > 1;
    const int64_t fanIn = weight ? a.numel() / a.shape[0] : 1;
    Array r = randomArray(DType::f64, a.shape, std::hash<std::string>()(name), -1, 1);
    for (double& v : r.values<double>()) v *= weight ? std::sqrt(3.0 / double(fanIn)) : 0.1;
    return convertArray(r, dtype);
  });
  state = mapTree(state, [&](const std::string&, const Array& a) { return convertArray(a, dtype); });
  return {params, state};
}

inline double maxAbs(const Array& a) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(valueAt(a, i)));
  return m;
}

// The worst over tensors of max|a - b| / max(max|b|, 1e-2 * max|b| over the tree). Conv biases
// that feed a BatchNorm have a true gradient of zero, so only rounding noise is compared there,
// on the scale of the whole tree. SPMD_TEST_VERBOSE=1 prints each tensor above 1e-6.
inline double treeError(const Tree& actual, const Tree& expected) {
  double treeMax = 0, worst = 0;
  for (const auto& [name, t] : expected) treeMax = std::max(treeMax, maxAbs(t.array()));
  for (const auto& [name, t] : expected) {
    const Array &b = t.array(), &a = actual.at(name).array();
    double diff = 0;
    for (int64_t i = 0; i < b.numel(); ++i) diff = std::max(diff, std::abs(valueAt(a, i) - valueAt(b, i)));
    const bool zeroGradient = name.find("conv") != std::string::npos && name.ends_with(".bias");
    const double e = diff / (zeroGradient ? treeMax : std::max(maxAbs(b), 1e-2 * treeMax));
    if (std::getenv("SPMD_TEST_VERBOSE") && e > 1e-6)
      std::printf("    %s: %.2e (max %.2e, tree %.2e)\n", name.c_str(), e, maxAbs(b), treeMax);
    worst = std::max(worst, e);
  }
  return worst;
}

// The first tensor (by name) of `a` whose bits differ from `b`'s, or "" when every tensor is the
// same bits.
inline std::string firstBitDifference(const Tree& a, const Tree& b) {
  for (const auto& [name, t] : a)
    if (t.array().bytes() != b.at(name).array().bytes() ||
        std::memcmp(t.array().data(), b.at(name).array().data(), t.array().bytes()) != 0)
      return name;
  return "";
}

inline bool sameBits(const Tree& a, const Tree& b) { return firstBitDifference(a, b).empty(); }

}  // namespace spmd::testing
