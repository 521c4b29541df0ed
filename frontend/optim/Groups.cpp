// Parameter groups: matching tree paths with fnmatch(3), overriding rate, decay and momentum.
#include "frontend/optim/Groups.h"

#include <fnmatch.h>

#include <cmath>

#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd::optim {
namespace {

bool matches(const ParamGroup& group, const std::string& name) {
  for (const std::string& pattern : group.match)
    if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

std::string describe(const ParamGroup& group) {
  std::string text = "{";
  for (size_t i = 0; i < group.match.size(); ++i) text += (i ? ", \"" : "\"") + group.match[i] + "\"";
  return text + "}";
}

}  // namespace

void checkGroups(const std::vector<ParamGroup>& groups, bool momentumAllowed, const char* who) {
  for (size_t i = 0; i < groups.size(); ++i) {
    const ParamGroup& g = groups[i];
    const std::string name = std::string(who) + ": parameter group " + std::to_string(i) + " " + describe(g);
    if (g.match.empty()) throw Error(name + " has no patterns; give .match = {\"*.bias\", ...}");
    for (const std::string& pattern : g.match)
      if (pattern.empty()) throw Error(name + " has an empty pattern");
    if (g.learningRate && !(*g.learningRate > 0 && std::isfinite(*g.learningRate)))
      throw Error(name + ": learningRate must be positive, got " + std::to_string(*g.learningRate));
    if (g.weightDecay && !(*g.weightDecay >= 0 && std::isfinite(*g.weightDecay)))
      throw Error(name + ": weightDecay must be >= 0, got " + std::to_string(*g.weightDecay));
    if (g.momentum && !momentumAllowed)
      throw Error(name + " sets momentum, which " + who + " does not have (its betas apply to every parameter)");
    if (g.momentum && !(*g.momentum >= 0 && *g.momentum < 1))
      throw Error(name + ": momentum must be in [0, 1), got " + std::to_string(*g.momentum));
  }
}

GroupSettings settingsFor(const std::vector<ParamGroup>& groups, const std::string& name,
                          double learningRate, double weightDecay, double momentum) {
  for (const ParamGroup& g : groups)
    if (matches(g, name))
      return {g.learningRate.value_or(learningRate), g.weightDecay.value_or(weightDecay),
              g.momentum.value_or(momentum), &g};
  return {learningRate, weightDecay, momentum, nullptr};
}

void requireEveryGroupUsed(const std::vector<ParamGroup>& groups, const std::vector<std::string>& names,
                           const char* who, Loc loc) {
  for (size_t i = 0; i < groups.size(); ++i) {
    bool used = false;
    for (const std::string& name : names)
      if (matches(groups[i], name)) used = true;
    if (!used)
      throw Error(detail::where(loc) + ": " + who + ": parameter group " + std::to_string(i) + " " +
                  describe(groups[i]) + " matches no parameter (paths look like '" +
                  (names.empty() ? std::string("stage1.0.bn1.weight") : names.front()) + "')");
  }
}

Tensor groupRate(const Tensor& baseRate, double groupRate, double baseRateConstant, Loc loc) {
  if (!baseRate.defined() || groupRate == baseRateConstant) return baseRate;
  return mul(baseRate, groupRate / baseRateConstant, loc);
}

Tensor stateEntry(const Tree& tree, const std::string& key, const char* what, const char* who, Loc loc) {
  if (!tree.contains(key))
    throw Error(detail::where(loc) + ": optim::" + who + "::update: no " + what + " '" + key +
                "'; pass the gradients of these parameters and the state from " + who + "::init");
  return tree.at(key, loc);
}

}  // namespace spmd::optim
