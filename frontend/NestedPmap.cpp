// spmd::pmap called while another function is traced: one replica's slice of each mapped
// argument (over any dimension, per leaf with spmd::perLeaf), the results stacked over the axis
// at a dimension or checked invariant (frontend/Pmap.h, callNested).
#include <string>
#include <vector>

#include "frontend/Mesh.h"
#include "frontend/Ops.h"
#include "frontend/Pmap.h"
#include "frontend/Trace.h"

namespace spmd::detail {
namespace {

std::string who(const PmapOptions& options, Loc defined) {
  return "spmd::pmap over axis '" + options.axisName + "' (made at " + where(defined) + ")";
}

// The mesh axis the nested pmap maps over, with every option it cannot honour refused.
int64_t nestedAxisSize(const PmapOptions& options, Loc defined) {
  Trace* outer = Trace::innermost();
  const std::string name = outer ? outer->function().getName().str() : "?";
  const Mesh* mesh = meshOf(options.axisName);
  if (!mesh) {
    const Mesh* any = outer ? outer->mesh() : nullptr;
    throw Error(who(options, defined) + " is called while '" + name + "' is traced, " +
                (any ? "whose mesh " + any->describe() + " has no axis '" + options.axisName + "'"
                     : std::string("which is not traced over a mesh")) +
                ": a pmap inside a traced function maps over an axis of the enclosing spmd::shardMap's mesh, each "
                "replica taking its slice of the mapped arguments (jax's pmap of a pmap is a shardMap over a mesh "
                "with both axes). Trace the outer function with spmd::shardMap over a mesh that has an axis '" +
                options.axisName + "' of the mapped arguments' leading size, or name that axis in PmapOptions::axisName");
  }
  const PmapOptions plain;
  std::string refused;
  if (!options.devices.empty()) refused = "devices (it runs on the enclosing mesh's)";
  else if (options.allReplicas) refused = "allReplicas";
  else if (options.accumulate != 1) refused = "accumulate";
  else if (options.shardUpdate || options.fullyShard) refused = "shardUpdate / fullyShard";
  else if (!options.donateArguments.empty()) refused = "donateArguments";
  else if (options.memoryBudget != plain.memoryBudget) refused = "memoryBudget";
  if (!refused.empty())
    throw Error(who(options, defined) + ", called while '" + name + "' is traced, is part of that function: its option " +
                refused + " belongs to the enclosing spmd::shardMap's options; leave it at its default here");
  return mesh->axisSize(options.axisName);
}

// The per-leaf axes of argument or output `index` of `count` (`list`: "inAxes" or "outAxes";
// `keys`: its leaves' paths within it), each stacked over a dimension or replicated.
std::vector<Axis> entryAxes(const std::vector<Axis>& axes, size_t index, size_t count, const std::string& list,
                            const std::vector<std::string>& keys, const PmapOptions& options, Loc defined) {
  const bool in = list == "inAxes";
  if (!axes.empty() && axes.size() != count)
    throw Error(who(options, defined) + ": " + list + " has " + std::to_string(axes.size()) + " entries for " +
                std::to_string(count) + (in ? " arguments" : " outputs") + "; give one per " +
                (in ? "argument" : "output") + ", or none");
  const Axis axis = axes.empty() ? (in ? Axis(0) : replicated) : axes[index];
  const std::string what = who(options, defined) + (in ? " argument " : " output ") + std::to_string(index) + " (" + list + ")";
  std::vector<Axis> leaves = leafAxes(axis, keys, what);
  for (const Axis& leaf : leaves)
    if (leaf.kind == Axis::Kind::Split || leaf.kind == Axis::Kind::Mesh)
      throw Error(what + " is " + (leaf.kind == Axis::Kind::Split ? "spmd::split" : "placed on a mesh") + ", which a pmap inside a traced function cannot take (there is no host batch "
                  "to deal out): stack it over the axis, [size, ...], and pass 0");
  return leaves;
}

// Dimension `dim` of a rank-`rank` value (negative: from the last), checked.
int64_t dimension(int dim, int64_t rank, const std::string& what, const char* list) {
  const int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    throw Error(what + " is mapped over its dimension " + std::to_string(dim) + " (" + list + "), but it has " +
                std::to_string(rank) + " dimension(s)" +
                (std::string(list) == "outAxes" ? " with the mapped one" : "") + "; give one of 0.." +
                std::to_string(rank - 1) + " or -" + std::to_string(rank) + "..-1");
  return d;
}

// The permutation moving dimension `from` of a rank-`rank` value to `to`, the others in order.
std::vector<int64_t> moving(int64_t from, int64_t to, int64_t rank) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return perm;
}

// x[axis index] of x [size, ...]: this replica's slice, gathered by its coordinate (a table
// lookup, whose gradient adds the slice's cotangent back into its row).
Tensor replicaSlice(const Tensor& x, const std::string& axis, int64_t size, const std::string& what, Loc defined) {
  if (x.shape().empty() || x.shape()[0] != size)
    throw Error(what + " " + x.typeString() + " is mapped over axis '" + axis + "' of size " + std::to_string(size) +
                " (the enclosing mesh's), so its mapped dimension must be " + std::to_string(size) +
                "; stack it over the axis or pass it spmd::replicated in PmapOptions::inAxes");
  const Shape rest(x.shape().begin() + 1, x.shape().end());
  const bool integer = x.dtype() == DType::i32;  // the lookup takes floats: i32 goes through f64, exactly
  const Tensor table = reshape(integer ? cast(x, DType::f64, defined) : x, {size, -1}, defined);
  const Tensor me = reshape(axisIndex(axis, defined), {1}, defined);
  const Tensor row = reshape(embedding(table, me, defined), rest, defined);
  return integer ? cast(row, DType::i32, defined) : row;
}

// The leaves' paths within argument or output `prefix` ("argument 2"; "" for a whole result).
std::vector<std::string> keysOf(const std::vector<std::string>& paths, size_t first, size_t count, const std::string& prefix) {
  std::vector<std::string> keys;
  for (size_t i = first; i < first + count; ++i)
    keys.push_back(prefix.empty() ? paths[i] : paths[i].size() > prefix.size() ? paths[i].substr(prefix.size() + 1) : "");
  return keys;
}

}  // namespace

bool tracing() { return Trace::innermost() != nullptr; }

std::vector<Tensor> nestedArguments(const PmapOptions& options, Loc defined, const Flat& flat,
                                    const std::vector<size_t>& argumentLeaves) {
  const int64_t size = nestedAxisSize(options, defined);
  std::vector<Tensor> inner;
  size_t leaf = 0;
  for (size_t a = 0; a < argumentLeaves.size(); ++a) {
    const std::string prefix = "argument " + std::to_string(a);
    const std::vector<Axis> axes = entryAxes(options.inAxes, a, argumentLeaves.size(), "inAxes",
                                             keysOf(flat.paths, leaf, argumentLeaves[a], prefix), options, defined);
    for (size_t k = 0; k < argumentLeaves[a]; ++k, ++leaf) {
      const Tensor& x = flat.leaves[leaf];
      if (axes[k].kind == Axis::Kind::Replicated) {
        inner.push_back(x);
        continue;
      }
      const std::string what = who(options, defined) + " " + flat.paths[leaf];
      const int64_t rank = int64_t(x.shape().size()), d = dimension(axes[k].dim, rank, what + " " + x.typeString(), "inAxes");
      inner.push_back(replicaSlice(d == 0 ? x : transpose(x, moving(d, 0, rank), defined), options.axisName, size, what,
                                   defined));
    }
  }
  return inner;
}

std::vector<Tensor> nestedResults(const PmapOptions& options, Loc defined, const PmapTraced& traced) {
  std::vector<Tensor> results;
  size_t leaf = 0;
  for (size_t e = 0; e < traced.elementLeaves.size(); ++e) {
    const std::string prefix = traced.tuple ? std::to_string(e) : "";
    const std::vector<Axis> axes = entryAxes(options.outAxes, e, traced.elementLeaves.size(), "outAxes",
                                             keysOf(traced.names, leaf, traced.elementLeaves[e], prefix), options, defined);
    for (size_t k = 0; k < traced.elementLeaves[e]; ++k, ++leaf) {
      const Tensor& y = traced.outputs[leaf];
      const std::string what = who(options, defined) + " output " + (traced.names[leaf].empty() ? "0" : traced.names[leaf]);
      if (axes[k].kind == Axis::Kind::Replicated) {
        if (variesOver(y, options.axisName))
          throw Error(what + " " + y.typeString() + " is returned spmd::replicated, but it varies over axis '" +
                      options.axisName + "' (it is computed from the replicas' slices). Reduce it over '" +
                      options.axisName + "' before returning it (spmd::pmean or psum), or return it stacked over "
                      "the axis (outAxes 0)");
        results.push_back(y);
        continue;
      }
      const int64_t rank = int64_t(y.shape().size()) + 1, d = dimension(axes[k].dim, rank, what + " " + y.typeString(), "outAxes");
      const Tensor stacked = allGather(y, options.axisName, defined);  // [size, ...y]
      results.push_back(d == 0 ? stacked : transpose(stacked, moving(0, d, rank), defined));
    }
  }
  return results;
}

}  // namespace spmd::detail
