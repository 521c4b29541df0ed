// RMSprop update (torch.optim.RMSprop): g += wd * p; v = alpha v + (1 - alpha) g^2; centered:
// m = alpha m + (1 - alpha) g, d = sqrt(v - m^2) + eps, else d = sqrt(v) + eps; with momentum
// b = momentum b + g / d, p -= lr * b; without, p -= lr * g / d.
#include "frontend/optim/RmsProp.h"

#include <cmath>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "frontend/optim/Schedule.h"

namespace spmd::optim {

RmsProp::RmsProp(RmsPropConfig config) : config_(config) {
  if (!(config.learningRate > 0) || !std::isfinite(config.learningRate))
    throw Error("optim::RmsProp: learningRate must be positive and finite, got " + std::to_string(config.learningRate));
  if (!(config.alpha >= 0 && config.alpha < 1))
    throw Error("optim::RmsProp: alpha must be in [0, 1), got " + std::to_string(config.alpha));
  if (!(config.epsilon > 0) || !std::isfinite(config.epsilon))
    throw Error("optim::RmsProp: epsilon must be positive and finite, got " + std::to_string(config.epsilon));
  if (!(config.weightDecay >= 0) || !std::isfinite(config.weightDecay))
    throw Error("optim::RmsProp: weightDecay must be >= 0 and finite, got " + std::to_string(config.weightDecay));
  if (!(config.momentum >= 0 && config.momentum < 1))
    throw Error("optim::RmsProp: momentum must be in [0, 1), got " + std::to_string(config.momentum));
  checkGroups(config.groups, true, "optim::RmsProp");
}

Tree RmsProp::init(const Tree& params) const {
  Tree state;
  for (const auto& [name, p] : params) {
    state.set("square_avg." + name, Array::zeros(p.dtype(), p.shape()));
    if (config_.centered) state.set("grad_avg." + name, Array::zeros(p.dtype(), p.shape()));
    if (settingsFor(config_.groups, name, config_.learningRate, config_.weightDecay, config_.momentum).momentum != 0)
      state.set("momentum_buffer." + name, Array::zeros(p.dtype(), p.shape()));
  }
  return state;
}

std::pair<Tree, Tree> RmsProp::update(const Tree& params, const Tree& grads, const Tree& state, Loc loc) const {
  return update(params, grads, state, Tensor(), loc);
}

std::pair<Tree, Tree> RmsProp::update(const Tree& params, const Tree& grads, const Tree& state,
                                      const Tensor& learningRate, Loc loc) const {
  auto require = [&](const Tree& tree, const std::string& key, const char* what) {
    return stateEntry(tree, key, what, "RmsProp", loc);
  };
  const RmsPropConfig& c = config_;
  Tree newParams, newState;
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  requireEveryGroupUsed(c.groups, names, "optim::RmsProp", loc);
  for (const auto& [name, p] : params) {
    const GroupSettings s = settingsFor(c.groups, name, c.learningRate, c.weightDecay, c.momentum);
    const Tensor rate = groupRate(learningRate, s.learningRate, c.learningRate, loc);
    Tensor g = require(grads, name, "gradient for parameter");
    if (s.weightDecay != 0) g = add(g, mul(p, s.weightDecay, loc), loc);
    const Tensor v = add(mul(require(state, "square_avg." + name, "state entry"), c.alpha, loc),
                         mul(mul(g, g, loc), 1 - c.alpha, loc), loc);
    newState.set("square_avg." + name, v);
    Tensor variance = v;
    if (c.centered) {
      const Tensor m = add(mul(require(state, "grad_avg." + name, "state entry"), c.alpha, loc),
                           mul(g, 1 - c.alpha, loc), loc);
      newState.set("grad_avg." + name, m);
      variance = sub(v, mul(m, m, loc), loc);
    }
    Tensor step = div(g, add(sqrt(variance, loc), c.epsilon, loc), loc);
    if (s.momentum != 0) {
      step = add(mul(require(state, "momentum_buffer." + name, "state entry"), s.momentum, loc), step, loc);
      newState.set("momentum_buffer." + name, step);
    }
    newParams.set(name, sub(p, timesRate(step, rate, s.learningRate, "RmsProp", loc), loc));
  }
  return {newParams, newState};
}

}  // namespace spmd::optim
