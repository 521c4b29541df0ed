// Collectives within groups of replicas (jax.lax's axis_index_groups): the groups' checks (the
// reductions, allGather, psumScatter and allToAll are single ops with replica groups,
// frontend/Collectives.cpp).
#include "frontend/Collectives.h"
#include "frontend/Mesh.h"
#include "frontend/Trace.h"

namespace spmd::detail {

// Each of the axis' replicas in exactly one group, the groups of one size; the flat list (group
// by group, each in its order).
std::vector<int64_t> checkedGroups(const AxisGroups& groups, const std::string& axis, const char* what, Loc loc) {
  const int64_t n = Trace::current(what, loc, true).checkAxis(axis, what, loc);
  const std::string at = where(loc) + ": spmd::" + what + " over axis '" + axis + "' with groups: ";
  if (groups.empty() || groups[0].empty())
    throw Error(at + "no groups given; give groups of replicas that together hold each of the axis' " +
                std::to_string(n) + " replicas once, or call it without groups");
  const size_t size = groups[0].size();
  std::vector<int64_t> groupOf(size_t(n), -1), flat;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].size() != size)
      throw Error(at + "group " + std::to_string(g) + " has " + std::to_string(groups[g].size()) +
                  " replicas but group 0 has " + std::to_string(size) + "; every group needs the same size");
    for (int64_t r : groups[g]) {
      if (r < 0 || r >= n)
        throw Error(at + "group " + std::to_string(g) + " names replica " + std::to_string(r) +
                    ", but the axis has replicas 0.." + std::to_string(n - 1));
      if (groupOf[size_t(r)] >= 0)
        throw Error(at + "replica " + std::to_string(r) + " is in group " + std::to_string(groupOf[size_t(r)]) +
                    " and in group " + std::to_string(g) + "; each replica belongs to one group");
      groupOf[size_t(r)] = int64_t(g);
      flat.push_back(r);
    }
  }
  for (int64_t r = 0; r < n; ++r)
    if (groupOf[size_t(r)] < 0)
      throw Error(at + "replica " + std::to_string(r) + " is in no group; the groups must hold every replica of the axis");
  return flat;
}

}  // namespace spmd::detail
