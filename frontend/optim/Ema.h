// An exponential moving average of the parameters, as torch.optim.swa_utils.AveragedModel with
// get_ema_multi_avg_fn(decay) (and optax.ema without debiasing after a first copy): the first
// update takes the parameters as they are, each later one average = average + (1 - decay) *
// (params - average). The average is replicated state under pmap (computed from replicated
// parameters, so it stays the same on every replica); evaluate with `weights(state)`.
#pragma once

#include "frontend/Tree.h"

namespace spmd::optim {

class Ema {
 public:
  explicit Ema(double decay);  // throws unless 0 <= decay < 1
  double decay() const { return decay_; }

  // The state: a copy of `params` under the same paths, and "ema_updates" (a rank-0 count of the
  // updates so far, 0: the first update copies).
  Tree init(const Tree& params) const;
  // One update from the current parameters: the new state. Call inside a traced function.
  Tree update(const Tree& state, const Tree& params, Loc loc = Loc::current()) const;
  // The averaged parameters alone (the state without its count): evaluate with these.
  static Tree weights(const Tree& state);

  static constexpr const char* kCount = "ema_updates";

 private:
  double decay_;
};

}  // namespace spmd::optim
