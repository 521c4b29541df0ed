// GroupExchange: the groups checked, and their Routes rule.
#include "runtime/mpi/GroupExchange.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/base/Error.h"

namespace spmd::runtime {

GroupExchange::GroupExchange(GroupOp op, std::vector<std::vector<int64_t>> members, int process, int processes,
                             size_t operandBytes)
    : op_(op), members_(std::move(members)), operandBytes_(operandBytes) {
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
  if (byRows() && groupSize_ > 0 && operandBytes % groupSize_ != 0)
    throw Error(std::string(op == GroupOp::Scatter ? "a reduce_scatter's" : "an all_to_all's") + " operand of " +
                std::to_string(operandBytes) + " bytes does not split into " +
                std::to_string(groupSize_) + " rows; this is a bug in spmd (checkProgram checks the shapes)");
  const size_t row = sourceBytes();
  // Replica dst reads src's operand (a reduce_scatter's row or an all_to_all's block at dst's
  // position) when they share a group; one of them is local, and its group is the other's.
  const int64_t first = int64_t(process) * local;
  routes_ = std::make_unique<Routes>(
      [this, first, local, row](int64_t dst, int64_t src) -> BytePiece {
        const bool dstHere = dst >= first && dst < first + local;
        const std::vector<int64_t>& group = members_[size_t((dstHere ? dst : src) - first)];
        const auto at = std::find(group.begin(), group.end(), dstHere ? src : dst);
        if (at == group.end()) return {};
        if (!byRows()) return {0, operandBytes_};
        const size_t position = size_t(std::find(group.begin(), group.end(), dst) - group.begin());
        return {position * row, row};
      },
      process, processes, local, operandBytes);
}

std::vector<const std::byte*> GroupExchange::sources(int l, const std::byte* operands, const std::byte* inbox) const {
  std::vector<const std::byte*> out;
  for (int64_t r : members_[size_t(l)]) out.push_back(routes_->piece(l, r, operands, inbox));
  return out;
}

}  // namespace spmd::runtime
