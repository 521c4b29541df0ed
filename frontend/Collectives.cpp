// The collective op functions: axis check, then one spmd collective op.
#include "frontend/Collectives.h"

#include <algorithm>
#include <set>

#include "frontend/Mesh.h"
#include "frontend/Ops.h"
#include "ir/SpmdDialect.h"
#include "frontend/Trace.h"

namespace spmd {
namespace {

// The mesh bound by spmd::shardMap when `axis` is one of its axes (frontend/Mesh.h): the
// collective then runs within that axis' groups of the mapped axis' replicas.
const Mesh* meshAxis(const std::string& axis) { return detail::meshOf(axis); }

std::string mappedAxis(const char* what, Loc loc) { return detail::Trace::current(what, loc, true).axisName(); }

// Replica groups of an all_reduce, flattened (empty: every replica of the axis), and their size.
struct FlatGroups {
  std::vector<int64_t> replicas;
  int64_t size = 0;
};

// One all_reduce op over `xs` (all of one dtype), within `groups` where given.
std::vector<Tensor> allReduceOp(detail::Trace& trace, const std::vector<Tensor>& xs, const std::string& axis,
                                ir::Reduction reduction, const FlatGroups& groups, Loc loc) {
  llvm::SmallVector<mlir::Value> values;
  for (const Tensor& x : xs) values.push_back(trace.valueOf(x, loc));
  mlir::OpBuilder& b = trace.builder();
  mlir::Operation* op = trace.create<ir::AllReduceOp>(
      loc, mlir::ValueRange(values), b.getStringAttr(axis), reduction,
      groups.replicas.empty() ? mlir::DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(groups.replicas),
      groups.replicas.empty() ? mlir::IntegerAttr() : b.getI64IntegerAttr(groups.size));
  std::vector<Tensor> results;
  for (mlir::Value v : op->getResults()) results.push_back(trace.wrap(v));
  return results;
}

// The leaves reduced dtype by dtype, as JAX's collectives reduce a pytree leaf by leaf: one
// combined all_reduce per dtype (in order of first appearance), results back in the leaves'
// order. The mean of integers is a float, as jnp.mean's: the integers' sum, converted to f32
// and divided by the axis size (JAX's pmean is psum / size), or the group's.
std::vector<Tensor> allReduce(const std::vector<Tensor>& xs, const std::string& axis, ir::Reduction reduction,
                              const char* what, Loc loc, const AxisGroups* within = nullptr) {
  if (const Mesh* mesh = meshAxis(axis)) {  // the mapped axis' all_reduce within the mesh axis' groups
    // Leaf by leaf: each op carries its own leaf's per-axis variation (markCollective), which a
    // combined op's one attribute could not; spmd-combine-all-reduce buckets them after tracing.
    const AxisGroups groups = mesh->groups(axis);
    std::vector<Tensor> results;
    for (const Tensor& x : xs)
      results.push_back(
          detail::markCollective(allReduce({x}, mappedAxis(what, loc), reduction, what, loc, &groups)[0], &x, axis, true, loc));
    return results;
  }
  detail::Trace& trace = detail::Trace::current(what, loc, true);
  int64_t size = trace.checkAxis(axis, what, loc);
  FlatGroups groups;
  if (within) {
    groups.replicas = detail::checkedGroups(*within, axis, what, loc);
    groups.size = int64_t((*within)[0].size());
    bool wholeInOrder = groups.size == size;  // one group of every replica in order: the plain all_reduce
    for (int64_t r = 0; wholeInOrder && r < size; ++r) wholeInOrder = groups.replicas[size_t(r)] == r;
    size = groups.size;
    if (wholeInOrder) groups = FlatGroups();
  }
  if (xs.empty()) return {};
  std::vector<DType> order;
  for (const Tensor& x : xs)
    if (std::find(order.begin(), order.end(), x.dtype()) == order.end()) order.push_back(x.dtype());
  std::vector<Tensor> results(xs.size());
  for (DType dtype : order) {
    const bool integerMean = reduction == ir::Reduction::Mean && dtype == DType::i32;
    std::vector<Tensor> group;
    std::vector<size_t> at;
    for (size_t i = 0; i < xs.size(); ++i)
      if (xs[i].dtype() == dtype) group.push_back(xs[i]), at.push_back(i);
    std::vector<Tensor> reduced =
        allReduceOp(trace, group, axis, integerMean ? ir::Reduction::Sum : reduction, groups, loc);
    for (size_t j = 0; j < at.size(); ++j) {
      if (integerMean) {
        Tensor sum = cast(reduced[j], DType::f32, loc);
        reduced[j] = div(sum, fill(sum, double(size), loc), loc);
      }
      results[at[j]] = reduced[j];
    }
  }
  return results;
}

Tree allReduce(const Tree& tree, const std::string& axis, ir::Reduction reduction, const char* what,
               Loc loc) {
  std::vector<Tensor> leaves;
  for (const auto& [name, t] : tree) leaves.push_back(t);
  std::vector<Tensor> reduced = allReduce(leaves, axis, reduction, what, loc);
  Tree out;
  size_t i = 0;
  for (const auto& [name, t] : tree) out.set(name, reduced[i++]);
  return out;
}

}  // namespace

Tensor psum(const Tensor& x, const std::string& axis, Loc loc) { return allReduce({x}, axis, ir::Reduction::Sum, "psum", loc)[0]; }
// Within groups: one all_reduce with replica groups, the bits of that collective over an axis of
// a group's replicas (its fold tree over G leaves in the group's order).
Tensor psum(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  return allReduce({x}, axis, ir::Reduction::Sum, "psum", loc, &groups)[0];
}
Tensor pmean(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  return allReduce({x}, axis, ir::Reduction::Mean, "pmean", loc, &groups)[0];
}
Tensor pmax(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  return allReduce({x}, axis, ir::Reduction::Max, "pmax", loc, &groups)[0];
}
Tensor pmin(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  return allReduce({x}, axis, ir::Reduction::Min, "pmin", loc, &groups)[0];
}
Tensor pmean(const Tensor& x, const std::string& axis, Loc loc) { return allReduce({x}, axis, ir::Reduction::Mean, "pmean", loc)[0]; }
Tensor pmax(const Tensor& x, const std::string& axis, Loc loc) { return allReduce({x}, axis, ir::Reduction::Max, "pmax", loc)[0]; }
Tensor pmin(const Tensor& x, const std::string& axis, Loc loc) { return allReduce({x}, axis, ir::Reduction::Min, "pmin", loc)[0]; }
Tree psum(const Tree& x, const std::string& axis, Loc loc) { return allReduce(x, axis, ir::Reduction::Sum, "psum", loc); }
Tree pmean(const Tree& x, const std::string& axis, Loc loc) { return allReduce(x, axis, ir::Reduction::Mean, "pmean", loc); }
std::vector<Tensor> psum(const std::vector<Tensor>& xs, const std::string& axis, Loc loc) {
  return allReduce(xs, axis, ir::Reduction::Sum, "psum", loc);
}
std::vector<Tensor> pmean(const std::vector<Tensor>& xs, const std::string& axis, Loc loc) {
  return allReduce(xs, axis, ir::Reduction::Mean, "pmean", loc);
}

Tensor allGather(const Tensor& x, const std::string& axis, Loc loc) {
  if (const Mesh* mesh = meshAxis(axis))
    return detail::markCollective(allGather(x, mappedAxis("allGather", loc), mesh->groups(axis), loc), &x, axis, true, loc);
  detail::Trace& trace = detail::Trace::current("allGather", loc, true);
  int64_t size = trace.checkAxis(axis, "allGather", loc);
  return trace.wrap(trace.create<ir::AllGatherOp>(loc, trace.valueOf(x, loc),
                                                  trace.builder().getStringAttr(axis),
                                                  trace.builder().getI64IntegerAttr(size), mlir::DenseI64ArrayAttr(),
                                                  mlir::IntegerAttr())
                        ->getResult(0));
}

// Within groups: the all_gather and reduce_scatter ops with replica groups (each replica reading
// its group's operands alone).
Tensor allGather(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  detail::Trace& trace = detail::Trace::current("allGather", loc, true);
  const std::vector<int64_t> flat = detail::checkedGroups(groups, axis, "allGather", loc);
  const int64_t g = int64_t(groups[0].size());
  mlir::OpBuilder& b = trace.builder();
  return trace.wrap(trace.create<ir::AllGatherOp>(loc, trace.valueOf(x, loc), b.getStringAttr(axis), b.getI64IntegerAttr(g),
                                                  b.getDenseI64ArrayAttr(flat), b.getI64IntegerAttr(g))
                        ->getResult(0));
}

// [G, ...] -> [...]: the member at position p of a group gets the sum over the group of row p.
Tensor psumScatter(const Tensor& x, const std::string& axis, const AxisGroups& groups, Loc loc) {
  detail::Trace& trace = detail::Trace::current("psumScatter", loc, true);
  const std::vector<int64_t> flat = detail::checkedGroups(groups, axis, "psumScatter", loc);
  const int64_t g = int64_t(groups[0].size());
  if (x.rank() < 1 || x.dim(0) != g)
    throw Error(detail::where(loc) + ": spmd::psumScatter over axis '" + axis + "' with groups needs a leading axis "
                "of the group size " + std::to_string(g) + " (one row per member), got " + x.typeString());
  mlir::OpBuilder& b = trace.builder();
  return trace.wrap(trace.create<ir::ReduceScatterOp>(loc, trace.valueOf(x, loc), b.getStringAttr(axis), ir::Reduction::Sum,
                                                      b.getDenseI64ArrayAttr(flat), b.getI64IntegerAttr(g))
                        ->getResult(0));
}

Tensor psumScatter(const Tensor& x, const std::string& axis, Loc loc) {
  if (const Mesh* mesh = meshAxis(axis))
    return detail::markCollective(psumScatter(x, mappedAxis("psumScatter", loc), mesh->groups(axis), loc), &x, axis,
                                  false, loc);
  detail::Trace& trace = detail::Trace::current("psumScatter", loc, true);
  int64_t size = trace.checkAxis(axis, "psumScatter", loc);
  if (x.rank() < 1 || x.dim(0) != size)
    throw Error(detail::where(loc) + ": spmd::psumScatter over axis '" + axis + "' needs a leading "
                "axis of size " + std::to_string(size) + " (one row per replica), got " + x.typeString());
  return trace.wrap(trace.create<ir::ReduceScatterOp>(loc, trace.valueOf(x, loc),
                                                      trace.builder().getStringAttr(axis), ir::Reduction::Sum,
                                                      mlir::DenseI64ArrayAttr(), mlir::IntegerAttr())
                        ->getResult(0));
}

Tensor ppermute(const Tensor& x, const std::string& axis, const std::vector<std::pair<int64_t, int64_t>>& perm,
                Loc loc) {
  detail::Trace& trace = detail::Trace::current("ppermute", loc, true);
  const Mesh* mesh = meshAxis(axis);
  const int64_t size = mesh ? mesh->axisSize(axis) : trace.checkAxis(axis, "ppermute", loc);
  std::set<int64_t> sources, destinations;
  std::vector<int64_t> pairs;
  for (auto [source, destination] : perm) {
    const std::string pair = "(" + std::to_string(source) + ", " + std::to_string(destination) + ")";
    for (int64_t replica : {source, destination})
      if (replica < 0 || replica >= size)
        throw Error(detail::where(loc) + ": spmd::ppermute over axis '" + axis + "': pair " + pair + " names replica " +
                    std::to_string(replica) + ", but the axis has replicas 0.." + std::to_string(size - 1));
    if (!sources.insert(source).second)
      throw Error(detail::where(loc) + ": spmd::ppermute over axis '" + axis + "': replica " + std::to_string(source) +
                  " is the source of two pairs; each replica sends its value once");
    if (!destinations.insert(destination).second)
      throw Error(detail::where(loc) + ": spmd::ppermute over axis '" + axis + "': replica " +
                  std::to_string(destination) + " is the destination of two pairs; each replica receives at most once");
    pairs.insert(pairs.end(), {source, destination});
  }
  if (mesh) {  // the pairs are coordinates along the mesh axis: each group exchanges alike
    std::vector<std::pair<int64_t, int64_t>> flat;
    for (const std::vector<int64_t>& group : mesh->groups(axis))
      for (auto [source, destination] : perm) flat.push_back({group[size_t(source)], group[size_t(destination)]});
    return detail::markCollective(ppermute(x, trace.axisName(), flat, loc), &x, axis, false, loc);
  }
  return trace.wrap(trace.create<ir::PpermuteOp>(loc, trace.valueOf(x, loc), trace.builder().getStringAttr(axis),
                                                 trace.builder().getDenseI64ArrayAttr(pairs))
                        ->getResult(0));
}

namespace {

// One all_to_all op over `size` replicas: every replica of the axis, or within `groups` (flat,
// groups of `size`) where given.
Tensor allToAllOp(const Tensor& x, const std::string& axis, int64_t size, int64_t splitAxis, int64_t concatAxis,
                  const std::vector<int64_t>& groups, Loc loc) {
  detail::Trace& trace = detail::Trace::current("allToAll", loc, true);
  const int64_t rank = int64_t(x.rank());
  if (splitAxis < 0) splitAxis += rank;
  if (concatAxis < 0) concatAxis += rank;
  const std::string at =
      detail::where(loc) + ": spmd::allToAll over axis '" + axis + "'" + (groups.empty() ? "" : " with groups") + ": ";
  if (splitAxis < 0 || splitAxis >= rank || concatAxis < 0 || concatAxis >= rank)
    throw Error(at + "split and concat axes must be axes of " + x.typeString());
  if (x.dim(size_t(splitAxis)) % size != 0)
    throw Error(at + x.typeString() + " has " + std::to_string(x.dim(size_t(splitAxis))) + " along split axis " +
                std::to_string(splitAxis) + ", which does not split into " + std::to_string(size) + " equal chunks, " +
                (groups.empty() ? "one per replica" : "one per member of a group"));
  mlir::OpBuilder& b = trace.builder();
  return trace.wrap(trace.create<ir::AllToAllOp>(
                             loc, trace.valueOf(x, loc), b.getStringAttr(axis), b.getI64IntegerAttr(size),
                             b.getI64IntegerAttr(splitAxis), b.getI64IntegerAttr(concatAxis),
                             groups.empty() ? mlir::DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(groups),
                             groups.empty() ? mlir::IntegerAttr() : b.getI64IntegerAttr(size))
                        ->getResult(0));
}

}  // namespace

Tensor allToAll(const Tensor& x, const std::string& axis, int64_t splitAxis, int64_t concatAxis, Loc loc) {
  if (const Mesh* mesh = meshAxis(axis))
    return detail::markCollective(allToAll(x, mappedAxis("allToAll", loc), splitAxis, concatAxis, mesh->groups(axis), loc),
                                  &x, axis, false, loc);
  const int64_t size = detail::Trace::current("allToAll", loc, true).checkAxis(axis, "allToAll", loc);
  return allToAllOp(x, axis, size, splitAxis, concatAxis, {}, loc);
}

// Within groups: one all_to_all with replica groups (the member at position p gets chunk p of
// each member's operand, in the group's order), each replica reading its group's operands alone.
Tensor allToAll(const Tensor& x, const std::string& axis, int64_t splitAxis, int64_t concatAxis, const AxisGroups& groups,
                Loc loc) {
  const std::vector<int64_t> flat = detail::checkedGroups(groups, axis, "allToAll", loc);
  return allToAllOp(x, axis, int64_t(groups[0].size()), splitAxis, concatAxis, flat, loc);
}

Tensor pbroadcast(const Tensor& x, const std::string& axis, int64_t source, Loc loc) {
  const Mesh* mesh = meshAxis(axis);
  const int64_t size =
      mesh ? mesh->axisSize(axis) : detail::Trace::current("pbroadcast", loc, true).checkAxis(axis, "pbroadcast", loc);
  if (source < 0 || source >= size)
    throw Error(detail::where(loc) + ": spmd::pbroadcast over axis '" + axis + "' from replica " +
                std::to_string(source) + ", but the axis has replicas 0.." + std::to_string(size - 1) +
                "; name one of them");
  Tensor all = mesh ? allGather(x, mappedAxis("pbroadcast", loc), mesh->groups(axis), loc) : allGather(x, axis, loc);
  std::vector<int64_t> start(size_t(all.rank()), 0), limit(all.shape().begin(), all.shape().end());
  start[0] = source, limit[0] = source + 1;
  Tensor one = reshape(slice(all, start, limit, loc), x.shape(), loc);
  return mesh ? detail::markCollective(one, &x, axis, true, loc) : one;
}

Tensor axisIndex(const std::string& axis, Loc loc) {
  if (const Mesh* mesh = meshAxis(axis)) {  // the replica's coordinate, from a table by its index
    std::vector<float> coordinates;
    for (int64_t r = 0; r < mesh->size(); ++r) coordinates.push_back(float(mesh->coordinate(r, axis)));
    Tensor table = Tensor(Array::of<float>({mesh->size(), 1}, coordinates));
    Tensor me = reshape(axisIndex(mappedAxis("axisIndex", loc), loc), {1}, loc);
    return detail::markCollective(cast(reshape(embedding(table, me, loc), {}, loc), DType::i32, loc), nullptr, axis,
                                  false, loc);
  }
  detail::Trace& trace = detail::Trace::current("axisIndex", loc, true);
  trace.checkAxis(axis, "axisIndex", loc);
  return trace.wrap(
      trace.create<ir::AxisIndexOp>(loc, trace.builder().getStringAttr(axis))->getResult(0));
}

int64_t axisSize(const std::string& axis, Loc loc) {
  if (const Mesh* mesh = meshAxis(axis)) return mesh->axisSize(axis);
  return detail::Trace::current("axisSize", loc, true).checkAxis(axis, "axisSize", loc);
}

}  // namespace spmd
