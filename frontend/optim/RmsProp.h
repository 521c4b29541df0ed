// RMSprop as torch.optim.RMSprop (epsilon added outside the square root; momentum and centered
// variants; L2 weight decay added to the gradient), written as traced ops over parameter Trees.
// optax.rmsprop differs: it adds epsilon inside the square root.
#pragma once

#include <utility>

#include "frontend/Tree.h"
#include "frontend/optim/Groups.h"

namespace spmd::optim {

struct RmsPropConfig {
  double learningRate = 1e-2;
  double alpha = 0.99;  // the squared gradients' running average's decay
  double epsilon = 1e-8;
  double weightDecay = 0.0;
  double momentum = 0.0;  // > 0: a momentum buffer of the normalized steps
  // Divides by the running variance (the squared average less the average's square) instead of
  // the squared average: one more buffer of the gradients' running average.
  bool centered = false;
  // Parameters whose path matches a group's patterns take its rate / weight decay / momentum
  // (optim/Groups.h), as torch.optim param_groups.
  std::vector<ParamGroup> groups = {};
};

class RmsProp {
 public:
  explicit RmsProp(RmsPropConfig config);  // throws on a bad configuration, saying which field
  const RmsPropConfig& config() const { return config_; }

  // State (zeros): "square_avg.<name>" per parameter, "grad_avg.<name>" when centered,
  // "momentum_buffer.<name>" where the parameter's momentum is above 0 (torch's names).
  Tree init(const Tree& params) const;
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               Loc loc = Loc::current()) const;
  // With the learning rate as a traced rank-0 tensor (a schedule's rate, optim/Schedule.h).
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               const Tensor& learningRate, Loc loc = Loc::current()) const;

 private:
  RmsPropConfig config_;
};

}  // namespace spmd::optim
