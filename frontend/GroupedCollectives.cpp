// Collectives within groups of replicas (jax.lax's axis_index_groups) other than the reductions
// (psum, pmean, pmax, pmin: one all_reduce with replica groups, frontend/Collectives.cpp; the
// groups checked here): allGather, psumScatter and allToAll, composed from allGather, axisIndex
// and row selections, so every backend runs them with the kernels it has and their gradients
// come from those ops' VJPs. psumScatter's group of G replicas folds its members' rows, in the
// group's order, over the same fixed tree an all_reduce over G replicas folds
// (runtime/device/Fold.h: node (h, i) is left op right, or left alone where the right is empty),
// in the element type: the bits of that collective over an axis of the group's replicas.
#include <set>

#include "frontend/Collectives.h"
#include "frontend/Mesh.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd {
namespace {

enum class Reduce { Sum, Mean, Max, Min };

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

// Integers (i32) go through f64, which holds every i32 and every sum of up to 2^21 of them
// exactly (so the fold order does not matter), and a sum comes back wrapped into i32's range as
// the i32 all_reduce wraps (two's complement): sum - 2^32 floor((sum + 2^31) / 2^32), exact in
// f64 (floor from the truncating cast, one less where the quotient is below its truncation).
Tensor wrappedToI32(const Tensor& sum, Loc loc) {
  const double two32 = 4294967296.0;
  Tensor q = mul(add(sum, fill(sum, 2147483648.0, loc), loc), 1 / two32, loc);
  Tensor t = cast(cast(q, DType::i32, loc), DType::f64, loc);
  Tensor down = sub(t, less(q, t, loc), loc);
  return cast(sub(sum, mul(down, two32, loc), loc), DType::i32, loc);
}

// [G, ...x]: the operands of this replica's group, in the group's order.
Tensor groupRows(const Tensor& x, const std::string& axis, const GroupTable& t, Loc loc) {
  const int64_t n = t.replicas, g = t.size, d = x.numel();
  Tensor all = reshape(allGather(x, axis, loc), {n, d}, loc);
  Tensor table = Tensor(Array::of<float>({n, g}, t.members));
  Tensor me = reshape(axisIndex(axis, loc), {1}, loc);
  Tensor ids = cast(reshape(embedding(table, me, loc), {g}, loc), DType::i32, loc);
  Shape shape{g};
  shape.insert(shape.end(), x.shape().begin(), x.shape().end());
  return reshape(embedding(all, ids, loc), shape, loc);
}

Tensor combine(const Tensor& a, const Tensor& b, Reduce op, Loc loc) {
  if (op == Reduce::Max) return maximum(a, b, loc);
  if (op == Reduce::Min) return minimum(a, b, loc);
  return add(a, b, loc);
}

// Node (h, i) of the fold tree over the rows' leaves.
Tensor foldNode(const std::vector<Tensor>& leaves, int h, int64_t i, Reduce op, Loc loc) {
  if (h == 0) return leaves[size_t(i)];
  Tensor left = foldNode(leaves, h - 1, 2 * i, op, loc);
  if (((2 * i + 1) << (h - 1)) >= int64_t(leaves.size())) return left;
  return combine(left, foldNode(leaves, h - 1, 2 * i + 1, op, loc), op, loc);
}

// Row k of `rows` ([G, ...]), shaped `shape`.
Tensor rowOf(const Tensor& rows, int64_t k, const Shape& shape, Loc loc) {
  std::vector<int64_t> start(size_t(rows.rank()), 0), limit(rows.shape().begin(), rows.shape().end());
  start[0] = k, limit[0] = k + 1;
  return reshape(slice(rows, start, limit, loc), shape, loc);
}

// The fold of the group's operands (`leaves`, in the group's order), a mean divided by G.
Tensor foldGroup(const std::vector<Tensor>& leaves, Reduce op, Loc loc) {
  int height = 0;
  while ((size_t(1) << height) < leaves.size()) ++height;
  Tensor root = foldNode(leaves, height, 0, op, loc);
  return op == Reduce::Mean ? div(root, fill(root, double(leaves.size()), loc), loc) : root;
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

// [G, ..] -> [..]: the member at position p of a group gets the fold over the group of row p.
Tensor psumScatter(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  if (x.dtype() == DType::i32) return wrappedToI32(psumScatter(cast(x, DType::f64, loc), axis, groups, loc), loc);
  const GroupTable t = groupTable(groups, axis, "psumScatter", loc);
  checkFloat(x, axis, "psumScatter", loc);
  if (x.rank() < 1 || x.dim(0) != t.size)
    throw Error(detail::where(loc) + ": spmd::psumScatter over axis '" + axis + "' with groups needs a leading axis "
                "of the group size " + std::to_string(t.size) + " (one row per member), got " + x.typeString());
  const Shape rowShape(x.shape().begin() + 1, x.shape().end());
  const int64_t d = numElements(rowShape);
  Tensor rows = groupRows(x, axis, t, loc);  // [G members, G rows, ...]
  Tensor me = reshape(axisIndex(axis, loc), {1}, loc);
  Tensor position = cast(reshape(embedding(Tensor(Array::of<float>({t.replicas, 1}, t.positions)), me, loc), {1}, loc),
                         DType::i32, loc);
  std::vector<Tensor> leaves;  // member k's row at this replica's position
  for (int64_t k = 0; k < t.size; ++k)
    leaves.push_back(reshape(embedding(reshape(rowOf(rows, k, x.shape(), loc), {t.size, d}, loc), position, loc),
                             rowShape, loc));
  return foldGroup(leaves, Reduce::Sum, loc);
}

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
  Tensor byChunk = transpose(reshape(groupRows(x, axis, t, loc), cut, loc), chunksFirst, loc);
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

Tensor allGather(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  if (x.dtype() == DType::i32) return cast(allGather(cast(x, DType::f64, loc), axis, groups, loc), DType::i32, loc);
  const GroupTable t = groupTable(groups, axis, "allGather", loc);
  checkFloat(x, axis, "allGather", loc);
  return groupRows(x, axis, t, loc);
}

}  // namespace spmd
