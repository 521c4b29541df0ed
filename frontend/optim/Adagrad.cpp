// Adagrad update (torch.optim.Adagrad): t += 1; g += wd * p; s += g^2;
// p -= lr / (1 + (t - 1) lrDecay) * g / (sqrt(s) + eps).
#include "frontend/optim/Adagrad.h"

#include <cmath>
#include <cstring>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "frontend/optim/Schedule.h"

namespace spmd::optim {
namespace {

// `value` in every element (rounded to the dtype once).
Array filledArray(DType dtype, const Shape& shape, double value) {
  Array a = Array::zeros(dtype, shape);
  const Array one = Array::scalar(dtype, value);
  const size_t size = dtypeSize(dtype);
  auto* to = reinterpret_cast<char*>(a.data());
  for (int64_t i = 0; i < a.numel(); ++i) std::memcpy(to + size_t(i) * size, one.data(), size);
  return a;
}

}  // namespace

Adagrad::Adagrad(AdagradConfig config) : config_(config) {
  if (!(config.learningRate > 0) || !std::isfinite(config.learningRate))
    throw Error("optim::Adagrad: learningRate must be positive and finite, got " + std::to_string(config.learningRate));
  if (!(config.lrDecay >= 0) || !std::isfinite(config.lrDecay))
    throw Error("optim::Adagrad: lrDecay must be >= 0 and finite, got " + std::to_string(config.lrDecay));
  if (!(config.weightDecay >= 0) || !std::isfinite(config.weightDecay))
    throw Error("optim::Adagrad: weightDecay must be >= 0 and finite, got " + std::to_string(config.weightDecay));
  if (!(config.initialAccumulatorValue >= 0) || !std::isfinite(config.initialAccumulatorValue))
    throw Error("optim::Adagrad: initialAccumulatorValue must be >= 0 and finite, got " +
                std::to_string(config.initialAccumulatorValue));
  if (!(config.epsilon > 0) || !std::isfinite(config.epsilon))
    throw Error("optim::Adagrad: epsilon must be positive and finite, got " + std::to_string(config.epsilon));
  checkGroups(config.groups, false, "optim::Adagrad");
}

Tree Adagrad::init(const Tree& params) const {
  Tree state;
  DType dtype = DType::f32;
  for (const auto& [name, p] : params) {
    state.set("sum." + name, filledArray(p.dtype(), p.shape(), config_.initialAccumulatorValue));
    dtype = p.dtype();
  }
  state.set("step", Array::scalar(dtype, 0.0));
  return state;
}

std::pair<Tree, Tree> Adagrad::update(const Tree& params, const Tree& grads, const Tree& state, Loc loc) const {
  return update(params, grads, state, Tensor(), loc);
}

std::pair<Tree, Tree> Adagrad::update(const Tree& params, const Tree& grads, const Tree& state,
                                      const Tensor& learningRate, Loc loc) const {
  auto require = [&](const Tree& tree, const std::string& key, const char* what) {
    return stateEntry(tree, key, what, "Adagrad", loc);
  };
  const AdagradConfig& c = config_;
  Tree newParams, newState;
  const Tensor previousSteps = require(state, "step", "state entry");  // t - 1
  newState.set("step", add(previousSteps, 1.0, loc));
  // 1 / (1 + (t - 1) lrDecay), a rank-0 tensor that broadcasts over each parameter.
  Tensor decay;
  if (c.lrDecay != 0) {
    const Tensor denominator = add(mul(previousSteps, c.lrDecay, loc), 1.0, loc);
    decay = div(fill(denominator, 1.0, loc), denominator, loc);
  }
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  requireEveryGroupUsed(c.groups, names, "optim::Adagrad", loc);
  for (const auto& [name, p] : params) {
    const GroupSettings s = settingsFor(c.groups, name, c.learningRate, c.weightDecay, 0.0);
    const Tensor rate = groupRate(learningRate, s.learningRate, c.learningRate, loc);
    Tensor g = require(grads, name, "gradient for parameter");
    if (s.weightDecay != 0) g = add(g, mul(p, s.weightDecay, loc), loc);
    const Tensor sum = add(require(state, "sum." + name, "state entry"), mul(g, g, loc), loc);
    newState.set("sum." + name, sum);
    Tensor step = div(g, add(sqrt(sum, loc), c.epsilon, loc), loc);
    if (decay.defined()) step = mul(step, decay, loc);
    newParams.set(name, sub(p, timesRate(step, rate, s.learningRate, "Adagrad", loc), loc));
  }
  return {newParams, newState};
}

}  // namespace spmd::optim
