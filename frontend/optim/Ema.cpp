// Ema: average + w * (params - average) with w = 1 on the first update, 1 - decay after it.
#include "frontend/optim/Ema.h"

#include <cmath>
#include <cstring>

#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd::optim {

Ema::Ema(double decay) : decay_(decay) {
  if (!(decay >= 0 && decay < 1))
    throw Error("optim::Ema: decay must be in [0, 1), got " + std::to_string(decay));
}

Tree Ema::init(const Tree& params) const {
  if (params.contains(kCount))
    throw Error(std::string("optim::Ema: a parameter is named '") + kCount + "', the name of the update count");
  Tree state;
  DType dtype = DType::f32;
  for (const auto& [name, p] : params) {
    const Array& value = p.array();
    Array copy = Array::zeros(value.dtype, value.shape);  // its own storage: donation cannot touch it
    std::memcpy(copy.data(), value.data(), value.bytes());
    state.set(name, copy);
    dtype = p.dtype();
  }
  state.set(kCount, Array::zeros(dtype, {}));
  return state;
}

Tree Ema::update(const Tree& state, const Tree& params, Loc loc) const {
  if (!state.contains(kCount))
    throw Error(detail::where(loc) + ": optim::Ema::update: the state has no '" + kCount +
                "'; create it with Ema::init(params)");
  const Tensor& count = state.at(kCount, loc);
  // w = 1 before the first update (AveragedModel copies then), else 1 - decay.
  Tensor weight = where(equal(count, fill(count, 0.0, loc), loc), fill(count, 1.0, loc),
                        fill(count, 1.0 - decay_, loc), loc);
  Tree out;
  for (const auto& [name, p] : params) {
    if (!state.contains(name))
      throw Error(detail::where(loc) + ": optim::Ema::update: no average for parameter '" + name +
                  "'; create the state with Ema::init(params)");
    const Tensor& average = state.at(name, loc);
    out.set(name, add(average, mul(sub(p, average, loc), weight, loc), loc));
  }
  out.set(kCount, add(count, 1.0, loc));
  return out;
}

Tree Ema::weights(const Tree& state) {
  Tree out;
  for (const auto& [name, value] : state)
    if (name != kCount) out.set(name, value);
  return out;
}

}  // namespace spmd::optim
