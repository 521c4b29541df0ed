// SGD with momentum, weight decay and Nesterov, as torch.optim.SGD (dampening 0), written as
// ordinary traced ops over parameter Trees so it compiles into the training step.
#pragma once

#include <utility>

#include "frontend/Tree.h"
#include "frontend/optim/Groups.h"

namespace spmd::optim {

struct SgdConfig {
  double learningRate = 0.1;
  double momentum = 0.0;     // 0: plain SGD, no state
  double weightDecay = 0.0;  // L2 term added to the gradient
  bool nesterov = false;     // needs momentum > 0
  // Parameters whose path matches a group's patterns take its rate / decay / momentum
  // (optim/Groups.h), as torch.optim param_groups.
  std::vector<ParamGroup> groups = {};
};

class Sgd {
 public:
  explicit Sgd(SgdConfig config);  // throws on a bad configuration, saying which field
  const SgdConfig& config() const { return config_; }

  // Optimizer state for `params` (concrete zeros): one momentum buffer per parameter, keyed by
  // the parameter's name; empty without momentum.
  Tree init(const Tree& params) const;
  // One step: {new params, new state}. Call inside a traced function.
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               Loc loc = Loc::current()) const;
  // With the learning rate as a traced rank-0 tensor (a schedule's rate, optim/Schedule.h)
  // instead of config().learningRate.
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               const Tensor& learningRate, Loc loc = Loc::current()) const;

 private:
  SgdConfig config_;
};

}  // namespace spmd::optim
