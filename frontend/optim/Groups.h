// Parameter groups, as torch.optim's param_groups and optax's masked / multi_transform: the
// parameters whose tree path matches a group's patterns get that group's learning rate, weight
// decay or momentum; the others the optimizer's own. "No weight decay on BatchNorm and biases":
//   optim::Sgd({.learningRate = 0.1, .momentum = 0.9, .weightDecay = 5e-4,
//               .groups = {{.match = {"*.bias", "*bn*"}, .weightDecay = 0.0}}});
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "frontend/Tensor.h"
#include "frontend/Tree.h"

namespace spmd::optim {

struct ParamGroup {
  // Shell-style patterns (fnmatch: '*', '?', '[...]') over the parameter's full tree path, e.g.
  // "stage1.0.bn1.weight"; a parameter belongs to the first group with a matching pattern.
  std::vector<std::string> match = {};
  std::optional<double> learningRate = {};  // with a traced schedule rate: scaled by this / the base rate
  std::optional<double> weightDecay = {};
  std::optional<double> momentum = {};  // SGD only
};

// A parameter's settings after its group (if any) overrides the optimizer's.
struct GroupSettings {
  double learningRate, weightDecay, momentum;
  const ParamGroup* group;  // nullptr: none matched
};

// Checks each group (patterns given, values in range; `who` names the optimizer in errors).
void checkGroups(const std::vector<ParamGroup>& groups, bool momentumAllowed, const char* who);
GroupSettings settingsFor(const std::vector<ParamGroup>& groups, const std::string& name,
                          double learningRate, double weightDecay, double momentum);
// Throws naming the group whose patterns matched no parameter of `names` (a typo would
// otherwise change nothing, silently).
void requireEveryGroupUsed(const std::vector<ParamGroup>& groups, const std::vector<std::string>& names,
                           const char* who, Loc loc);
// The rate tensor for a parameter of the group: the traced base rate scaled by
// groupRate / baseRate (undefined stays undefined: the constant groupRate is used then).
Tensor groupRate(const Tensor& baseRate, double groupRate, double baseRateConstant, Loc loc);
// tree[key] (a gradient or a state entry, `what`), or an error naming optimizer `who`'s update,
// the missing key and where the state comes from (`who`::init).
Tensor stateEntry(const Tree& tree, const std::string& key, const char* what, const char* who, Loc loc);

}  // namespace spmd::optim
