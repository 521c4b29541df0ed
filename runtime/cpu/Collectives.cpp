// CPU collective kernels: thin calls into the replica's Communicator (runtime/device/Communicator.h),
// which reduces a combined all_reduce's operands in one collective.
#include <vector>

#include "runtime/device/Communicator.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {
std::string what(const KernelCall& call) { return call.step.op + " at " + call.step.location; }
}  // namespace

// All operands in one collective. When the executor lets the step finish later (call.later) the
// communicator's handle is waited for before a later step reads the results, so a communicator
// that reduces on its own thread runs behind the following steps.
void all_reduce(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  const AllReduceAttrs& attrs = attrsOf<AllReduceAttrs>(call.step);
  Reduction op = attrs.reduction;
  std::vector<Communicator::Segment> in, out;
  for (const TensorView& v : call.in) in.push_back({v.data, v.numel()});
  for (const TensorView& v : call.out) out.push_back({v.data, v.numel()});
  if (!attrs.replica_groups.empty()) {  // within this replica's group (a psum over a mesh axis)
    const std::vector<int64_t> members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
    comm.allReduceInGroup(in, out, call.in[0].dtype, op, members, what(call)).wait();
    return;
  }
  Communicator::Pending pending = comm.allReduce(in, out, call.in[0].dtype, op, what(call), call.later != nullptr);
  if (call.later && !pending.done())
    *call.later = [pending]() mutable { pending.wait(); };
  else
    pending.wait();
}

// Like all_reduce, it may finish behind the following steps (FSDP's prefetched gathers).
void all_gather(KernelCall& call) {
  if (const AllGatherAttrs& attrs = attrsOf<AllGatherAttrs>(call.step); !attrs.replica_groups.empty()) {
    Communicator& comm = communicatorOf(call);
    const std::vector<int64_t> members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
    comm.allGatherInGroup(call.in[0].data, call.out[0].data, call.in[0].numel() * dtypeSize(call.in[0].dtype), members,
                          what(call))
        .wait();
    return;
  }
  Communicator::Pending pending =
      communicatorOf(call).allGather(call.in[0].data, call.out[0].data,
                                     call.in[0].numel() * dtypeSize(call.in[0].dtype), what(call), call.later != nullptr);
  if (call.later && !pending.done())
    *call.later = [pending]() mutable { pending.wait(); };
  else
    pending.wait();
}

// Sums (or averages) the whole [N, ...] input over replicas, then keeps this replica's row; like all_reduce,
// it may finish behind the following steps.
void reduce_scatter(KernelCall& call) {
  const TensorView& in = call.in[0];
  if (const ReduceScatterAttrs& attrs = attrsOf<ReduceScatterAttrs>(call.step); !attrs.replica_groups.empty()) {
    Communicator& comm = communicatorOf(call);
    const std::vector<int64_t> members = groupMembers(attrs.replica_groups, attrs.group_size, comm.rank());
    comm.reduceScatterInGroup(in.data, call.out[0].data, in.dtype, in.numel(), attrs.reduction, members, what(call)).wait();
    return;
  }
  Communicator::Pending pending =
      communicatorOf(call).reduceScatter(in.data, call.out[0].data, in.dtype, in.numel(),
                                         attrsOf<ReduceScatterAttrs>(call.step).reduction, what(call), call.later != nullptr);
  if (call.later && !pending.done())
    *call.later = [pending]() mutable { pending.wait(); };
  else
    pending.wait();
}

// The communicator's permute: in process a copy of the source's operand, across processes only
// the pairs that cross them move.
void ppermute(KernelCall& call) {
  const size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  communicatorOf(call).permute(call.in[0].data, call.out[0].data, bytes, attrsOf<PpermuteAttrs>(call.step).pairs,
                               what(call)).wait();
}

void axis_index(KernelCall& call) { *call.out[0].as<int32_t>() = axisIndexOf(call); }

}  // namespace spmd::runtime::cpu
