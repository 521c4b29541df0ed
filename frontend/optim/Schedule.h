// Learning-rate schedules: the rate for step t (0-based), evaluated on the host. Pass
// `rateAt(schedule, t)` to the training step as a scalar Tensor argument and hand it to
// Sgd/Adam::update: the rate is then a traced input, so a schedule runs on one compiled step
// (a rate captured as a C++ double would be a constant baked into the trace).
#pragma once

#include <cstdint>
#include <functional>

#include "frontend/Tensor.h"
#include "runtime/base/Array.h"

namespace spmd::optim {

using Schedule = std::function<double(int64_t step)>;

Schedule constantRate(double rate);
// torch.optim.lr_scheduler.StepLR: base * factor^(t / every).
Schedule stepDecay(double base, int64_t every, double factor);
// optax.cosine_decay_schedule: floor + (base - floor) (1 + cos(pi t / steps)) / 2, then floor.
Schedule cosineDecay(double base, int64_t steps, double floor = 0.0);
// Linear from base / warmupSteps up to `after(0)` over the first warmupSteps steps, then
// `after(t - warmupSteps)`.
Schedule linearWarmup(int64_t warmupSteps, Schedule after);

// The schedule's rate at `step` as a rank-0 array of `dtype` (the parameters' float type).
// Throws naming the step where it is negative or the rate is not a non-negative finite number.
Array rateAt(const Schedule& schedule, int64_t step, DType dtype = DType::f32);

// x * rate, for optimizers: the traced `rate` when defined (it must be rank 0 and of x's dtype;
// `who` and `loc` name the call in the error), else the constant.
Tensor timesRate(const Tensor& x, const Tensor& rate, double constant, const char* who, Loc loc);

}  // namespace spmd::optim
