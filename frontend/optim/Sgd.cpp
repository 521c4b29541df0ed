// SGD update: g += wd * p; buf = momentum * buf + g; step = nesterov ? g + momentum * buf : buf;
// p -= lr * step (torch.optim.SGD with dampening 0; a zero buffer makes the first step buf = g).
#include "frontend/optim/Sgd.h"

#include <cmath>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "frontend/optim/Schedule.h"

namespace spmd::optim {

Sgd::Sgd(SgdConfig config) : config_(config) {
  if (!(config.learningRate > 0) || !std::isfinite(config.learningRate))
    throw Error("optim::Sgd: learningRate must be positive and finite, got " + std::to_string(config.learningRate));
  if (!(config.momentum >= 0 && config.momentum < 1))  // NaN too
    throw Error("optim::Sgd: momentum must be in [0, 1), got " + std::to_string(config.momentum));
  if (!(config.weightDecay >= 0) || !std::isfinite(config.weightDecay))
    throw Error("optim::Sgd: weightDecay must be >= 0 and finite, got " + std::to_string(config.weightDecay));
  if (config.nesterov && config.momentum == 0)
    throw Error("optim::Sgd: nesterov needs momentum > 0 (as in torch.optim.SGD)");
  checkGroups(config.groups, true, "optim::Sgd");
  for (const ParamGroup& g : config.groups)
    if (config.nesterov && g.momentum && *g.momentum == 0)
      throw Error("optim::Sgd: nesterov needs momentum > 0 in every parameter group");
}

Tree Sgd::init(const Tree& params) const {
  Tree state;
  for (const auto& [name, p] : params)
    if (settingsFor(config_.groups, name, config_.learningRate, config_.weightDecay, config_.momentum).momentum != 0)
      state.set(name, Array::zeros(p.dtype(), p.shape()));
  return state;
}

std::pair<Tree, Tree> Sgd::update(const Tree& params, const Tree& grads, const Tree& state,
                                  Loc loc) const {
  return update(params, grads, state, Tensor(), loc);
}

std::pair<Tree, Tree> Sgd::update(const Tree& params, const Tree& grads, const Tree& state,
                                  const Tensor& learningRate, Loc loc) const {
  Tree newParams, newState;
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  requireEveryGroupUsed(config_.groups, names, "optim::Sgd", loc);
  for (const auto& [name, p] : params) {
    const GroupSettings s = settingsFor(config_.groups, name, config_.learningRate, config_.weightDecay, config_.momentum);
    if (!grads.contains(name))
      throw Error(detail::where(loc) + ": optim::Sgd::update: no gradient for parameter '" + name +
                  "'; pass the gradient tree of these parameters");
    Tensor g = grads.at(name, loc);
    if (s.weightDecay != 0) g = add(g, mul(p, s.weightDecay, loc), loc);
    Tensor step = g;
    if (s.momentum != 0) {
      if (!state.contains(name))
        throw Error(detail::where(loc) + ": optim::Sgd::update: no momentum buffer for '" + name +
                    "'; create the state with Sgd::init(params)");
      Tensor buffer = add(mul(state.at(name, loc), s.momentum, loc), g, loc);
      newState.set(name, buffer);
      step = config_.nesterov ? add(g, mul(buffer, s.momentum, loc), loc) : buffer;
    }
    const Tensor rate = groupRate(learningRate, s.learningRate, config_.learningRate, loc);
    newParams.set(name, sub(p, timesRate(step, rate, s.learningRate, "Sgd", loc), loc));
  }
  return {newParams, newState};
}

}  // namespace spmd::optim
