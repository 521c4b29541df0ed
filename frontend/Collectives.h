// Collectives over the axis bound by spmd::pmap, as jax.lax's: psum, pmean, pmax, pmin,
// allGather, psumScatter, ppermute, allToAll, pbroadcast, axisIndex, and psum / pmean / pmax / pmin /
// allGather / psumScatter / allToAll within groups of replicas (GroupedCollectives.cpp). Inside the mapped function they record spmd collective ops
// at the caller's line; naming an axis that is not bound is an error there. A Tree (or a list)
// reduces in one combined collective per dtype of its leaves. Integers (i32) keep their dtype in
// every collective but pmean, whose mean of integers is an f32 (as jnp.mean's): their exact sum,
// wrapping on overflow as i32 does, divided by the axis size.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "frontend/Tree.h"

namespace spmd {

// Several axes of the mesh bound by spmd::shardMap at once (jax's tuple of axis names):
// psum(x, Axes{"data", "fsdp"}) folds over the replicas that share every other axis'
// coordinate, each group ordered by the listed axes' coordinates, the first listed the slowest
// (allGather stacks in that order, axisIndex is that position, axisSize the product). The bits
// are those of the collective over an axis of the group's replicas; the result is invariant over
// every listed axis (psumScatter's varies over them). Write Axes{...}: a bare {"a", "b"} is
// ambiguous with one axis name and does not compile.
struct Axes {
  std::vector<std::string> names;
  Axes(std::initializer_list<std::string> list) : names(list) {}
  explicit Axes(std::vector<std::string> list) : names(std::move(list)) {}
};
Tensor psum(const Tensor& x, const Axes& axes, Loc loc = Loc::current());
Tensor pmean(const Tensor& x, const Axes& axes, Loc loc = Loc::current());
Tensor pmax(const Tensor& x, const Axes& axes, Loc loc = Loc::current());
Tensor pmin(const Tensor& x, const Axes& axes, Loc loc = Loc::current());
Tree psum(const Tree& x, const Axes& axes, Loc loc = Loc::current());
Tree pmean(const Tree& x, const Axes& axes, Loc loc = Loc::current());
Tensor allGather(const Tensor& x, const Axes& axes, Loc loc = Loc::current());
Tensor psumScatter(const Tensor& x, const Axes& axes, Loc loc = Loc::current());
Tensor axisIndex(const Axes& axes, Loc loc = Loc::current());
int64_t axisSize(const Axes& axes, Loc loc = Loc::current());

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
// Sends each replica's x to another (jax.lax.ppermute): `perm` lists (source, destination) pairs;
// replica d gets source s's x, a replica that is no destination gets zeros. No replica may
// send or receive twice. Rings, shifts and halo exchanges: {{0, 1}, {1, 2}, ..., {N-1, 0}}.
// Its gradient goes back along the inverted pairs.
Tensor ppermute(const Tensor& x, const std::string& axis, const std::vector<std::pair<int64_t, int64_t>>& perm,
                Loc loc = Loc::current());
// jax.lax.all_to_all: x is cut into axis-size equal chunks along `splitAxis`; replica j gets
// chunk j of every replica, concatenated in replica order along `concatAxis` (sequence or
// expert parallelism: [tokens, experts, d] -> [tokens * N, experts / N, d]). Its gradient is the
// all_to_all with the two axes swapped.
Tensor allToAll(const Tensor& x, const std::string& axis, int64_t splitAxis, int64_t concatAxis,
                Loc loc = Loc::current());
// Replica `source`'s x on every replica (jax.lax.pbroadcast): the same bits, replicated. Its
// gradient flows to replica `source`, summed over the replicas (an all_gather and a slice).
Tensor pbroadcast(const Tensor& x, const std::string& axis, int64_t source = 0, Loc loc = Loc::current());
// Within groups of replicas (jax.lax's axis_index_groups): `groups` holds each of the axis' N
// replicas once, in groups of one size G ({{0, 1}, {2, 3}}: pairs); each replica reduces over, or
// gathers from, its own group only, in the group's order. The bits are those of the collective
// over an axis of that group's G replicas (the same fold tree), and the result is no longer the
// same on every replica of the axis. Float and i32 tensors (i32 through f64, exact, a sum wrapping
// as the i32 all_reduce's; pmean an f32). Each is one collective with replica groups: a replica
// reads its own group's operands only, and across processes only what another process's members
// need crosses (runtime/mpi/GroupExchange.h).
using AxisGroups = std::vector<std::vector<int64_t>>;
Tensor psum(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc = Loc::current());
Tensor pmean(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc = Loc::current());
Tensor pmax(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc = Loc::current());
Tensor pmin(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc = Loc::current());
// [..] -> [G, ..]: the group's operands stacked in the group's order.
Tensor allGather(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc = Loc::current());
// [G, ..] -> [..]: the replica at position p of its group gets the sum over the group of row p.
Tensor psumScatter(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc = Loc::current());
// allToAll within each group: the member at position p gets chunk p of every member's x, in the
// group's order.
Tensor allToAll(const Tensor& x, const std::string& axis, int64_t splitAxis, int64_t concatAxis, const AxisGroups& groups,
                Loc loc = Loc::current());

// This replica's index along the axis, a scalar i32 tensor.
Tensor axisIndex(const std::string& axis, Loc loc = Loc::current());
// The number of replicas along the axis (known while tracing).
int64_t axisSize(const std::string& axis, Loc loc = Loc::current());

}  // namespace spmd
