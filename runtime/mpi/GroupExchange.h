// What one process of a job sends and receives for a collective within replica groups (an
// all_reduce, all_gather or reduce_scatter with replica_groups): only the bytes the other
// processes' replicas need, not every replica's operand. A replica's operand goes to a process
// only when that process holds a member of its group (a reduce_scatter's, only the rows those
// members fold), so a group within one process moves nothing between processes: a mesh axis laid
// out within the hosts (model parallelism) costs no network at all, and one across them moves
// each operand once to each process of its group. Every process derives its plan from its own
// replicas' groups; the sender's and the receiver's orders agree (replicas in rank order, a
// reduce_scatter's rows in group order), so no sizes are exchanged. No MPI here:
// ProcessCommunicator moves the bytes, and the unit tests move them in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spmd::runtime {

enum class GroupOp { Reduce, Gather, Scatter };  // all_reduce, all_gather, reduce_scatter within groups

class GroupExchange {
 public:
  // `members[l]`: local replica l's group (global ranks, in group order; global rank = process *
  // members.size() + l), every group of one size G. `operandBytes`: one replica's operand (a
  // reduce_scatter's G rows). Throws spmd::Error when a replica is missing from its own group,
  // the groups' sizes differ, or a reduce_scatter's operand does not split into G rows.
  GroupExchange(GroupOp op, std::vector<std::vector<int64_t>> members, int process, int processes,
                size_t operandBytes);

  // The outbox: for each process q in order, at sendOffset(q), sendBytes(q) bytes.
  size_t sendOffset(int q) const { return sendAt_[size_t(q)]; }
  size_t sendBytes(int q) const { return sendAt_[size_t(q) + 1] - sendAt_[size_t(q)]; }
  size_t outboxBytes() const { return sendAt_.back(); }
  // The inbox: from each process q, at receiveOffset(q), receiveBytes(q) bytes.
  size_t receiveOffset(int q) const { return receiveAt_[size_t(q)]; }
  size_t receiveBytes(int q) const { return receiveAt_[size_t(q) + 1] - receiveAt_[size_t(q)]; }
  size_t inboxBytes() const { return receiveAt_.back(); }

  // Fills the outbox from the local replicas' operands (replica l's at l * operandBytes).
  void pack(const std::byte* operands, std::byte* outbox) const;
  // Local replica l's sources in group order: each member's operand (a reduce_scatter's: the row
  // of l's position), from `operands` for this process's members and `inbox` for the others'.
  std::vector<const std::byte*> sources(int l, const std::byte* operands, const std::byte* inbox) const;
  // Bytes of one source: the operand, or a reduce_scatter's row.
  size_t sourceBytes() const { return op_ == GroupOp::Scatter ? operandBytes_ / groupSize_ : operandBytes_; }
  size_t groupSize() const { return groupSize_; }

 private:
  struct Piece {
    int local;  // the local replica whose operand it is cut from
    size_t offset, bytes;
  };
  int processOf(int64_t rank) const { return int(rank / int64_t(members_.size())); }
  // Position of `rank` among the members of `group` that live on this process (group order).
  size_t localPosition(const std::vector<int64_t>& group, int64_t rank) const;

  GroupOp op_;
  std::vector<std::vector<int64_t>> members_;
  int process_, processes_;
  size_t operandBytes_, groupSize_ = 0;
  std::vector<std::vector<Piece>> pieces_;  // what goes to each process, in outbox order
  std::vector<size_t> sendAt_, receiveAt_;   // prefix sums over processes
  std::vector<size_t> receivedAt_;           // by global rank: where its piece lies in the inbox
};

}  // namespace spmd::runtime
