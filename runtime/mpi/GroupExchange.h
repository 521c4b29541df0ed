// What one process of a job sends and receives for a collective within replica groups (an
// all_reduce, all_gather, reduce_scatter or all_to_all with replica_groups): only the bytes the
// other processes' replicas need, not every replica's operand. A replica's operand goes to a
// process only when that process holds a member of its group (a reduce_scatter's or all_to_all's,
// only the rows or blocks those members read), so a group within one process moves nothing between processes: a mesh axis laid
// out within the hosts (model parallelism) costs no network at all, and one across them moves
// each operand once to each process of its group. The plan is a Routes (runtime/mpi/Routes.h)
// whose rule every process derives from its own replicas' groups (the groups hold each replica
// once, so a local replica's group is its remote members' too).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/mpi/Routes.h"

namespace spmd::runtime {

// all_reduce, all_gather, reduce_scatter and all_to_all (Exchange) within groups
enum class GroupOp { Reduce, Gather, Scatter, Exchange };

class GroupExchange {
 public:
  // `members[l]`: local replica l's group (global ranks, in group order; global rank = process *
  // members.size() + l), every group of one size G. `operandBytes`: one replica's operand (a
  // reduce_scatter's G rows, an all_to_all's G blocks). Throws spmd::Error when a replica is
  // missing from its own group, the groups' sizes differ, or a reduce_scatter's or all_to_all's
  // operand does not split into G rows.
  GroupExchange(GroupOp op, std::vector<std::vector<int64_t>> members, int process, int processes,
                size_t operandBytes);

  // What to send and receive (runtime/mpi/Routes.h).
  const Routes& routes() const { return *routes_; }
  // Local replica l's sources in group order: each member's operand (a reduce_scatter's or an
  // all_to_all's: the row or block at l's position), from `operands` for this process's members
  // and `inbox` for the others'.
  std::vector<const std::byte*> sources(int l, const std::byte* operands, const std::byte* inbox) const;
  // Bytes of one source: the operand, or a reduce_scatter's row (an all_to_all's block).
  size_t sourceBytes() const { return byRows() ? operandBytes_ / groupSize_ : operandBytes_; }
  size_t groupSize() const { return groupSize_; }

 private:
  bool byRows() const { return op_ == GroupOp::Scatter || op_ == GroupOp::Exchange; }
  GroupOp op_;
  std::vector<std::vector<int64_t>> members_;
  size_t operandBytes_, groupSize_ = 0;
  std::unique_ptr<Routes> routes_;
};

}  // namespace spmd::runtime
