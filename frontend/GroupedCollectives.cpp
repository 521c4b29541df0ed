// Collectives within groups of replicas (jax.lax's axis_index_groups): the groups' checks (the
// reductions, allGather and psumScatter are single ops with replica groups,
// frontend/Collectives.cpp), and allToAll within groups, composed of the all_gather within groups
// and a selection of this replica's chunks by its position, so every backend runs it and its
// gradient comes from those ops' VJPs.
#include <set>

#include "frontend/Collectives.h"
#include "frontend/Mesh.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd {
namespace {

// Row r: the members of replica r's group, in the group's order ([N, G], f32: exact below 2^24),
// and r's position in it.
struct GroupTable {
  int64_t replicas = 0, size = 0;
  std::vector<float> members, positions;
};

GroupTable groupTable(const AxisGroups& groups, const std::string& axis, const char* what, Loc loc) {
  const int64_t n = detail::Trace::current(what, loc, true).checkAxis(axis, what, loc);
  const std::string at = detail::where(loc) + ": spmd::" + what + " over axis '" + axis + "' with groups: ";
  if (groups.empty() || groups[0].empty())
    throw Error(at + "no groups given; give groups of replicas that together hold each of the axis' " +
                std::to_string(n) + " replicas once, or call it without groups");
  GroupTable table{n, int64_t(groups[0].size()), std::vector<float>(size_t(n * int64_t(groups[0].size()))),
                   std::vector<float>(size_t(n))};
  std::vector<int64_t> groupOf(size_t(n), -1);
  for (size_t g = 0; g < groups.size(); ++g) {
    if (int64_t(groups[g].size()) != table.size)
      throw Error(at + "group " + std::to_string(g) + " has " + std::to_string(groups[g].size()) +
                  " replicas but group 0 has " + std::to_string(table.size) + "; every group needs the same size");
    for (int64_t r : groups[g]) {
      if (r < 0 || r >= n)
        throw Error(at + "group " + std::to_string(g) + " names replica " + std::to_string(r) +
                    ", but the axis has replicas 0.." + std::to_string(n - 1));
      if (groupOf[size_t(r)] >= 0)
        throw Error(at + "replica " + std::to_string(r) + " is in group " + std::to_string(groupOf[size_t(r)]) +
                    " and in group " + std::to_string(g) + "; each replica belongs to one group");
      groupOf[size_t(r)] = int64_t(g);
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    if (groupOf[size_t(r)] < 0)
      throw Error(at + "replica " + std::to_string(r) + " is in no group; the groups must hold every replica of the axis");
    const auto& members = groups[size_t(groupOf[size_t(r)])];
    for (int64_t k = 0; k < table.size; ++k) {
      table.members[size_t(r * table.size + k)] = float(members[size_t(k)]);
      if (members[size_t(k)] == r) table.positions[size_t(r)] = float(k);
    }
  }
  return table;
}

void checkFloat(const Tensor& x, const std::string& axis, const char* what, Loc loc) {
  if (x.dtype() != DType::f32 && x.dtype() != DType::f64 && x.dtype() != DType::bf16)
    throw Error(detail::where(loc) + ": spmd::" + what + " over axis '" + axis + "' with groups takes float or i32 "
                "tensors, got " + x.typeString() + "; cast it to f32 first, or reduce over the whole axis");
}

// [G, ...x]: the operands of this replica's group, in the group's order (the native all_gather
// within groups).
Tensor groupRows(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  return allGather(x, axis, groups, loc);
}

}  // namespace

namespace detail {

std::vector<int64_t> checkedGroups(const AxisGroups& groups, const std::string& axis, const char* what, Loc loc) {
  groupTable(groups, axis, what, loc);  // the checks, naming the group and replica at fault
  std::vector<int64_t> flat;
  for (const std::vector<int64_t>& group : groups) flat.insert(flat.end(), group.begin(), group.end());
  return flat;
}

}  // namespace detail

// The member at position p gets chunk p (along splitAxis) of every member's x, concatenated in the
// group's order along concatAxis: the group's rows [G, ...x], each cut along splitAxis into
// [G chunks, c] with the chunk axis moved first, this replica's chunk taken by its position, and
// the members' chunks merged into concatAxis (member-major).
Tensor allToAll(const Tensor& x, const std::string& axis, int64_t splitAxis, int64_t concatAxis, const AxisGroups& groups,
                Loc loc) {
  if (x.dtype() == DType::i32)
    return cast(allToAll(cast(x, DType::f64, loc), axis, splitAxis, concatAxis, groups, loc), DType::i32, loc);
  const GroupTable t = groupTable(groups, axis, "allToAll", loc);
  checkFloat(x, axis, "allToAll", loc);
  const int64_t rank = int64_t(x.rank()), g = t.size;
  if (splitAxis < 0) splitAxis += rank;
  if (concatAxis < 0) concatAxis += rank;
  const std::string at = detail::where(loc) + ": spmd::allToAll over axis '" + axis + "' with groups: ";
  if (splitAxis < 0 || splitAxis >= rank || concatAxis < 0 || concatAxis >= rank)
    throw Error(at + "split and concat axes must be axes of " + x.typeString());
  if (x.dim(size_t(splitAxis)) % g != 0)
    throw Error(at + x.typeString() + " has " + std::to_string(x.dim(size_t(splitAxis))) + " along split axis " +
                std::to_string(splitAxis) + ", which does not split into " + std::to_string(g) +
                " equal chunks, one per member of a group");
  const size_t s = size_t(splitAxis);
  Shape cut{g};  // [G members, x[:s], G chunks, c, x[s+1:]]
  cut.insert(cut.end(), x.shape().begin(), x.shape().begin() + splitAxis);
  cut.insert(cut.end(), {g, x.dim(s) / g});
  cut.insert(cut.end(), x.shape().begin() + splitAxis + 1, x.shape().end());
  std::vector<int64_t> chunksFirst{int64_t(s) + 1, 0};  // [G chunks, G members, x[:s], c, x[s+1:]]
  for (int64_t d = 1; d < int64_t(cut.size()); ++d)
    if (d != int64_t(s) + 1) chunksFirst.push_back(d);
  Tensor byChunk = transpose(reshape(groupRows(x, axis, groups, loc), cut, loc), chunksFirst, loc);
  Shape chunk = x.shape();  // one member's chunk
  chunk[s] /= g;
  const int64_t perChunk = g * numElements(chunk);
  Tensor me = reshape(axisIndex(axis, loc), {1}, loc);
  Tensor position = cast(reshape(embedding(Tensor(Array::of<float>({t.replicas, 1}, t.positions)), me, loc), {1}, loc),
                         DType::i32, loc);
  Shape members{g};  // [G members, chunk...]
  members.insert(members.end(), chunk.begin(), chunk.end());
  Tensor mine = reshape(embedding(reshape(byChunk, {g, perChunk}, loc), position, loc), members, loc);
  // Members just before concatAxis, then merged with it: member j's rows come j-th.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == concatAxis) order.push_back(0);
    order.push_back(d + 1);
  }
  Shape result = chunk;
  result[size_t(concatAxis)] *= g;
  return reshape(transpose(mine, order, loc), result, loc);
}

}  // namespace spmd
