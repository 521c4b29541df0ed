// Adagrad as torch.optim.Adagrad (the rate decayed by 1 / (1 + (t - 1) lrDecay) at step t, an
// initial accumulator value, epsilon outside the square root, L2 weight decay added to the
// gradient), written as traced ops over parameter Trees.
#pragma once

#include <utility>

#include "frontend/Tree.h"
#include "frontend/optim/Groups.h"

namespace spmd::optim {

struct AdagradConfig {
  double learningRate = 1e-2;
  double lrDecay = 0.0;
  double weightDecay = 0.0;
  double initialAccumulatorValue = 0.0;
  double epsilon = 1e-10;
  // Parameters whose path matches a group's patterns take its rate / weight decay (optim/Groups.h).
  std::vector<ParamGroup> groups = {};
};

class Adagrad {
 public:
  explicit Adagrad(AdagradConfig config);  // throws on a bad configuration, saying which field
  const AdagradConfig& config() const { return config_; }

  // State: "sum.<name>" per parameter (the squared gradients' sum, from initialAccumulatorValue)
  // and the scalar "step" (steps taken, from 0) for the rate's decay.
  Tree init(const Tree& params) const;
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               Loc loc = Loc::current()) const;
  // With the learning rate as a traced rank-0 tensor (a schedule's rate, optim/Schedule.h).
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               const Tensor& learningRate, Loc loc = Loc::current()) const;

 private:
  AdagradConfig config_;
};

}  // namespace spmd::optim
