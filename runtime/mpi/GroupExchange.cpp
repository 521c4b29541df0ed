// GroupExchange: the pieces each process sends, and where each received piece lands.
#include "runtime/mpi/GroupExchange.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include "runtime/base/Error.h"

namespace spmd::runtime {

GroupExchange::GroupExchange(GroupOp op, std::vector<std::vector<int64_t>> members, int process, int processes,
                             size_t operandBytes)
    : op_(op), members_(std::move(members)), process_(process), processes_(processes), operandBytes_(operandBytes) {
  const int local = int(members_.size());
  for (int l = 0; l < local; ++l) {
    const std::vector<int64_t>& group = members_[size_t(l)];
    const int64_t me = int64_t(process) * local + l;
    if (groupSize_ == 0) groupSize_ = group.size();
    if (group.empty() || group.size() != groupSize_)
      throw Error("replica " + std::to_string(me) + "'s group holds " + std::to_string(group.size()) +
                  " replicas where another's holds " + std::to_string(groupSize_) +
                  "; this is a bug in spmd (checkProgram holds every group to one size)");
    if (std::find(group.begin(), group.end(), me) == group.end())
      throw Error("replica " + std::to_string(me) + " is not in its own replica group; this is a bug in spmd");
    for (int64_t r : group)
      if (r < 0 || r >= int64_t(processes) * local)
        throw Error("replica group member " + std::to_string(r) + " is outside the job's " +
                    std::to_string(int64_t(processes) * local) + " replicas; this is a bug in spmd");
  }
  if (op == GroupOp::Scatter && groupSize_ > 0 && operandBytes % groupSize_ != 0)
    throw Error("a reduce_scatter's operand of " + std::to_string(operandBytes) + " bytes does not split into " +
                std::to_string(groupSize_) + " rows; this is a bug in spmd (checkProgram checks the shapes)");
  const size_t row = sourceBytes();

  // Sends: local replica by local replica, a piece to each other process holding a member of its
  // group (a reduce_scatter's: the rows of that process's members, in group order).
  pieces_.assign(size_t(processes), {});
  for (int l = 0; l < local; ++l) {
    const std::vector<int64_t>& group = members_[size_t(l)];
    for (int q = 0; q < processes; ++q) {
      if (q == process) continue;
      if (op == GroupOp::Scatter) {
        for (size_t k = 0; k < group.size(); ++k)
          if (processOf(group[k]) == q) pieces_[size_t(q)].push_back({l, k * row, row});
      } else if (std::any_of(group.begin(), group.end(), [&](int64_t r) { return processOf(r) == q; })) {
        pieces_[size_t(q)].push_back({l, 0, operandBytes});
      }
    }
  }
  sendAt_.assign(size_t(processes) + 1, 0);
  for (int q = 0; q < processes; ++q) {
    size_t bytes = 0;
    for (const Piece& p : pieces_[size_t(q)]) bytes += p.bytes;
    sendAt_[size_t(q) + 1] = sendAt_[size_t(q)] + bytes;
  }

  // Receives: every other process's member of a local group, in rank order (the order its
  // process sends them in), each with the rows this process's members fold.
  std::map<int64_t, const std::vector<int64_t>*> remote;  // rank -> its group (as a local member sees it)
  for (const std::vector<int64_t>& group : members_)
    for (int64_t r : group)
      if (processOf(r) != process) remote.emplace(r, &group);
  receivedAt_.assign(size_t(processes) * size_t(local), std::numeric_limits<size_t>::max());
  receiveAt_.assign(size_t(processes) + 1, 0);
  size_t at = 0;
  for (int q = 0; q < processes; ++q) {
    receiveAt_[size_t(q)] = at;
    for (auto it = remote.lower_bound(int64_t(q) * local); it != remote.end() && processOf(it->first) == q; ++it) {
      receivedAt_[size_t(it->first)] = at;
      if (op == GroupOp::Scatter)
        at += row * size_t(std::count_if(it->second->begin(), it->second->end(),
                                         [&](int64_t r) { return processOf(r) == process; }));
      else
        at += operandBytes;
    }
  }
  receiveAt_[size_t(processes)] = at;
}

size_t GroupExchange::localPosition(const std::vector<int64_t>& group, int64_t rank) const {
  size_t position = 0;
  for (int64_t r : group) {
    if (r == rank) return position;
    if (processOf(r) == process_) ++position;
  }
  return position;
}

void GroupExchange::pack(const std::byte* operands, std::byte* outbox) const {
  for (int q = 0; q < processes_; ++q) {
    std::byte* to = outbox + sendOffset(q);
    for (const Piece& p : pieces_[size_t(q)]) {
      std::memcpy(to, operands + size_t(p.local) * operandBytes_ + p.offset, p.bytes);
      to += p.bytes;
    }
  }
}

std::vector<const std::byte*> GroupExchange::sources(int l, const std::byte* operands, const std::byte* inbox) const {
  const std::vector<int64_t>& group = members_[size_t(l)];
  const int64_t me = int64_t(process_) * int64_t(members_.size()) + l;
  const size_t position = size_t(std::find(group.begin(), group.end(), me) - group.begin());
  const size_t row = sourceBytes();
  std::vector<const std::byte*> out;
  out.reserve(group.size());
  for (int64_t r : group) {
    if (processOf(r) == process_) {
      const size_t offset = op_ == GroupOp::Scatter ? position * row : 0;
      out.push_back(operands + size_t(r - int64_t(process_) * int64_t(members_.size())) * operandBytes_ + offset);
    } else {
      // A reduce_scatter's piece from r holds the rows of this process's members, in group order.
      const size_t offset = op_ == GroupOp::Scatter ? localPosition(group, me) * row : 0;
      out.push_back(inbox + receivedAt_[size_t(r)] + offset);
    }
  }
  return out;
}

}  // namespace spmd::runtime
