// Adam as torch.optim.Adam (bias-corrected moments, L2 weight decay added to the gradient) and,
// with decoupledWeightDecay, as torch.optim.AdamW; written as traced ops over parameter Trees.
#pragma once

#include <utility>

#include "frontend/Tree.h"
#include "frontend/optim/Groups.h"

namespace spmd::optim {

struct AdamConfig {
  double learningRate = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double epsilon = 1e-8;
  double weightDecay = 0.0;
  // AdamW: p -= lr * weightDecay * p before the Adam step, instead of adding weightDecay * p
  // to the gradient (torch.optim.AdamW; its default weightDecay is 0.01).
  bool decoupledWeightDecay = false;
  // Parameters whose path matches a group's patterns take its rate / weight decay
  // (optim/Groups.h; momentum is SGD's), as torch.optim param_groups.
  std::vector<ParamGroup> groups = {};
};

class Adam {
 public:
  explicit Adam(AdamConfig config);  // throws on a bad configuration, saying which field
  const AdamConfig& config() const { return config_; }

  // State: "exp_avg.<name>" and "exp_avg_sq.<name>" per parameter (zeros) and the scalars
  // "beta1_power" / "beta2_power" (beta^t after t steps, starting at 1) for bias correction.
  Tree init(const Tree& params) const;
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               Loc loc = Loc::current()) const;
  // With the learning rate as a traced rank-0 tensor (a schedule's rate, optim/Schedule.h)
  // instead of config().learningRate.
  std::pair<Tree, Tree> update(const Tree& params, const Tree& grads, const Tree& state,
                               const Tensor& learningRate, Loc loc = Loc::current()) const;

 private:
  AdamConfig config_;
};

}  // namespace spmd::optim
