// Collectives over the axis bound by spmd::pmap, as jax.lax's: psum, pmean, pmax, pmin,
// allGather, psumScatter, pbroadcast, axisIndex. Inside the mapped function they record spmd collective ops
// at the caller's line; naming an axis that is not bound is an error there. A Tree (or a list)
// reduces in one combined collective per dtype of its leaves. Integers (i32) keep their dtype in
// every collective but pmean, whose mean of integers is an f32 (as jnp.mean's): their exact sum,
// wrapping on overflow as i32 does, divided by the axis size.
#pragma once

#include <string>
#include <vector>

#include "frontend/Tree.h"

namespace spmd {

Tensor psum(const Tensor& x, const std::string& axis, Loc loc = Loc::current());
Tensor pmean(const Tensor& x, const std::string& axis, Loc loc = Loc::current());
Tensor pmax(const Tensor& x, const std::string& axis, Loc loc = Loc::current());
Tensor pmin(const Tensor& x, const std::string& axis, Loc loc = Loc::current());
Tree psum(const Tree& x, const std::string& axis, Loc loc = Loc::current());
Tree pmean(const Tree& x, const std::string& axis, Loc loc = Loc::current());
std::vector<Tensor> psum(const std::vector<Tensor>& xs, const std::string& axis, Loc loc = Loc::current());
std::vector<Tensor> pmean(const std::vector<Tensor>& xs, const std::string& axis, Loc loc = Loc::current());

// [..] -> [axis size, ..]: every replica's x, stacked in replica order.
Tensor allGather(const Tensor& x, const std::string& axis, Loc loc = Loc::current());
// [axis size, ..] -> [..]: replica r gets the sum over replicas of x[r] (allGather's transpose).
Tensor psumScatter(const Tensor& x, const std::string& axis, Loc loc = Loc::current());
// Replica `source`'s x on every replica (jax.lax.pbroadcast): the same bits, replicated. Its
// gradient flows to replica `source`, summed over the replicas (an all_gather and a slice).
Tensor pbroadcast(const Tensor& x, const std::string& axis, int64_t source = 0, Loc loc = Loc::current());
// This replica's index along the axis, a scalar i32 tensor.
Tensor axisIndex(const std::string& axis, Loc loc = Loc::current());
// The number of replicas along the axis (known while tracing).
int64_t axisSize(const std::string& axis, Loc loc = Loc::current());

}  // namespace spmd
