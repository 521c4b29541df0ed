// Learning-rate schedules as host functions of the step.
#include "frontend/optim/Schedule.h"

#include "frontend/Ops.h"
#include "frontend/Trace.h"

#include <cmath>
#include <numbers>
#include <string>

namespace spmd::optim {
namespace {

void requirePositive(const char* where, const char* what, double value) {
  if (!(value > 0) || !std::isfinite(value))
    throw Error(std::string("optim::") + where + ": " + what + " must be a positive finite number, got " +
                std::to_string(value));
}

}  // namespace

Schedule constantRate(double rate) {
  requirePositive("constantRate", "rate", rate);
  return [rate](int64_t) { return rate; };
}

Schedule stepDecay(double base, int64_t every, double factor) {
  requirePositive("stepDecay", "base", base);
  requirePositive("stepDecay", "factor", factor);
  if (every < 1) throw Error("optim::stepDecay: every must be >= 1 step, got " + std::to_string(every));
  return [=](int64_t t) { return base * std::pow(factor, double(t / every)); };
}

Schedule cosineDecay(double base, int64_t steps, double floor) {
  requirePositive("cosineDecay", "base", base);
  if (steps < 1) throw Error("optim::cosineDecay: steps must be >= 1, got " + std::to_string(steps));
  if (!(floor >= 0 && floor <= base))  // NaN too
    throw Error("optim::cosineDecay: floor must be in [0, base], got " + std::to_string(floor));
  return [=](int64_t t) {
    double done = double(std::min(t, steps)) / double(steps);
    return floor + (base - floor) * 0.5 * (1 + std::cos(std::numbers::pi * done));
  };
}

Schedule linearWarmup(int64_t warmupSteps, Schedule after) {
  if (warmupSteps < 1) throw Error("optim::linearWarmup: warmupSteps must be >= 1, got " + std::to_string(warmupSteps));
  if (!after) throw Error("optim::linearWarmup: the schedule after the warmup is empty");
  return [warmupSteps, after = std::move(after)](int64_t t) {
    return t < warmupSteps ? after(0) * double(t + 1) / double(warmupSteps) : after(t - warmupSteps);
  };
}

Array rateAt(const Schedule& schedule, int64_t step, DType dtype) {
  if (!schedule) throw Error("optim::rateAt: the schedule is empty");
  if (step < 0)
    throw Error("optim::rateAt: step " + std::to_string(step) + " is negative; steps count from 0 (the first step's rate)");
  double rate = schedule(step);
  // 0 is a rate (cosineDecay's default floor, reached at its last step; torch.optim takes lr = 0).
  if (!(rate >= 0) || !std::isfinite(rate))
    throw Error("optim::rateAt: the schedule gives " + std::to_string(rate) + " at step " + std::to_string(step) +
                "; a learning rate must be a non-negative finite number");
  if (dtype == DType::i32) throw Error("optim::rateAt: the rate's dtype must be a float (the parameters'), got i32");
  return Array::scalar(dtype, rate);
}

Tensor timesRate(const Tensor& x, const Tensor& rate, double constant, const char* who, Loc loc) {
  if (!rate.defined()) return mul(x, constant, loc);
  if (rate.rank() != 0 || rate.dtype() != x.dtype())
    throw Error(spmd::detail::where(loc) + ": optim::" + who + "::update: the learning rate must be a rank-0 " +
                std::string(dtypeName(x.dtype())) + " tensor (the parameters' dtype), got " + rate.typeString() +
                "; pass optim::rateAt(schedule, step, dtype)");
  return mul(x, rate, loc);
}

}  // namespace spmd::optim
