// Adam update (torch.optim.Adam): g += wd * p (AdamW instead: p -= lr * wd * p); m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
#include "frontend/optim/Adam.h"

#include <cmath>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "frontend/optim/Schedule.h"

namespace spmd::optim {

Adam::Adam(AdamConfig config) : config_(config) {
  if (!(config.learningRate > 0) || !std::isfinite(config.learningRate))
    throw Error("optim::Adam: learningRate must be positive and finite, got " + std::to_string(config.learningRate));
  for (auto [value, name] : {std::pair{config.beta1, "beta1"}, {config.beta2, "beta2"}})
    if (!(value >= 0 && value < 1))  // NaN too
      throw Error(std::string("optim::Adam: ") + name + " must be in [0, 1), got " + std::to_string(value));
  if (!(config.epsilon > 0) || !std::isfinite(config.epsilon))
    throw Error("optim::Adam: epsilon must be positive and finite, got " + std::to_string(config.epsilon));
  if (!(config.weightDecay >= 0) || !std::isfinite(config.weightDecay))
    throw Error("optim::Adam: weightDecay must be >= 0 and finite, got " + std::to_string(config.weightDecay));
  checkGroups(config.groups, false, "optim::Adam");
}

Tree Adam::init(const Tree& params) const {
  Tree state;
  DType dtype = DType::f32;
  for (const auto& [name, p] : params) {
    state.set("exp_avg." + name, Array::zeros(p.dtype(), p.shape()));
    state.set("exp_avg_sq." + name, Array::zeros(p.dtype(), p.shape()));
    dtype = p.dtype();
  }
  for (const char* power : {"beta1_power", "beta2_power"}) {
    state.set(power, Array::scalar(dtype, 1.0));
  }
  return state;
}

std::pair<Tree, Tree> Adam::update(const Tree& params, const Tree& grads, const Tree& state,
                                   Loc loc) const {
  return update(params, grads, state, Tensor(), loc);
}

std::pair<Tree, Tree> Adam::update(const Tree& params, const Tree& grads, const Tree& state,
                                   const Tensor& learningRate, Loc loc) const {
  auto require = [&](const Tree& tree, const std::string& key, const char* what) {
    return stateEntry(tree, key, what, "Adam", loc);
  };
  const AdamConfig& c = config_;
  Tree newParams, newState;
  Tensor beta1Power = mul(require(state, "beta1_power", "state entry"), c.beta1, loc);
  Tensor beta2Power = mul(require(state, "beta2_power", "state entry"), c.beta2, loc);
  newState.set("beta1_power", beta1Power);
  newState.set("beta2_power", beta2Power);
  // 1 - beta^t, as rank-0 tensors that broadcast over each parameter.
  Tensor correction1 = add(mul(beta1Power, -1.0, loc), 1.0, loc);
  Tensor correction2 = add(mul(beta2Power, -1.0, loc), 1.0, loc);
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  requireEveryGroupUsed(c.groups, names, "optim::Adam", loc);
  for (const auto& [name, p] : params) {
    const GroupSettings s = settingsFor(c.groups, name, c.learningRate, c.weightDecay, 0.0);
    const Tensor rate = groupRate(learningRate, s.learningRate, c.learningRate, loc);
    Tensor g = require(grads, name, "gradient for parameter");
    Tensor decayed = p;
    if (s.weightDecay != 0 && c.decoupledWeightDecay)
      decayed = sub(p, timesRate(mul(p, s.weightDecay, loc), rate, s.learningRate, "Adam", loc), loc);
    else if (s.weightDecay != 0)
      g = add(g, mul(p, s.weightDecay, loc), loc);
    Tensor m = add(mul(require(state, "exp_avg." + name, "state entry"), c.beta1, loc),
                   mul(g, 1 - c.beta1, loc), loc);
    Tensor v = add(mul(require(state, "exp_avg_sq." + name, "state entry"), c.beta2, loc),
                   mul(mul(g, g, loc), 1 - c.beta2, loc), loc);
    newState.set("exp_avg." + name, m);
    newState.set("exp_avg_sq." + name, v);
    Tensor denom = add(sqrt(div(v, correction2, loc), loc), c.epsilon, loc);
    Tensor step = div(div(m, correction1, loc), denom, loc);
    newParams.set(name, sub(decayed, timesRate(step, rate, s.learningRate, "Adam", loc), loc));
  }
  return {newParams, newState};
}

}  // namespace spmd::optim
