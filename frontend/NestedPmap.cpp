// spmd::pmap called while another function is traced: one replica's slice of each mapped
// argument, the results stacked over the axis or checked invariant (frontend/Pmap.h, callNested).
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

// Axis `axis` of a nested pmap's in_axes / out_axes list, refused when it is not one it supports.
Axis axisAt(const std::vector<Axis>& axes, size_t index, size_t count, const char* list, const PmapOptions& options,
            Loc defined) {
  if (!axes.empty() && axes.size() != count)
    throw Error(who(options, defined) + ": " + list + " has " + std::to_string(axes.size()) + " entries for " +
                std::to_string(count) + (std::string(list) == "inAxes" ? " arguments" : " outputs") +
                "; give one per " + (std::string(list) == "inAxes" ? "argument" : "output") + ", or none");
  Axis axis = axes.empty() ? (std::string(list) == "inAxes" ? Axis(0) : replicated) : axes[index];
  const bool supported = !axis.leaves && (axis.kind == Axis::Kind::Replicated ||
                                          (axis.kind == Axis::Kind::Stacked && axis.dim == 0));
  if (!supported)
    throw Error(who(options, defined) + ": " + list + " entry " + std::to_string(index) +
                " is not supported inside a traced function: there an argument or output is stacked over dimension 0 "
                "(0) or the same on every replica (spmd::replicated), one Axis for the whole value");
  return axis;
}

// x[axis index] of x [size, ...]: this replica's slice, gathered by its coordinate (a table
// lookup, whose gradient adds the slice's cotangent back into its row).
Tensor replicaSlice(const Tensor& x, const std::string& axis, int64_t size, const std::string& what, Loc defined) {
  if (x.shape().empty() || x.shape()[0] != size)
    throw Error(what + " " + x.typeString() + " is mapped over axis '" + axis + "' of size " + std::to_string(size) +
                " (the enclosing mesh's), so its leading dimension must be " + std::to_string(size) +
                "; stack it [" + std::to_string(size) + ", ...] or pass it spmd::replicated in PmapOptions::inAxes");
  const Shape rest(x.shape().begin() + 1, x.shape().end());
  const bool integer = x.dtype() == DType::i32;  // the lookup takes floats: i32 goes through f64, exactly
  const Tensor table = reshape(integer ? cast(x, DType::f64, defined) : x, {size, -1}, defined);
  const Tensor me = reshape(axisIndex(axis, defined), {1}, defined);
  const Tensor row = reshape(embedding(table, me, defined), rest, defined);
  return integer ? cast(row, DType::i32, defined) : row;
}

}  // namespace

bool tracing() { return Trace::innermost() != nullptr; }

std::vector<Tensor> nestedArguments(const PmapOptions& options, Loc defined, const Flat& flat,
                                    const std::vector<size_t>& argumentLeaves) {
  const int64_t size = nestedAxisSize(options, defined);
  std::vector<Tensor> inner;
  size_t leaf = 0;
  for (size_t a = 0; a < argumentLeaves.size(); ++a) {
    const Axis axis = axisAt(options.inAxes, a, argumentLeaves.size(), "inAxes", options, defined);
    for (size_t k = 0; k < argumentLeaves[a]; ++k, ++leaf) {
      const Tensor& x = flat.leaves[leaf];
      inner.push_back(axis.kind == Axis::Kind::Replicated
                          ? x
                          : replicaSlice(x, options.axisName, size, who(options, defined) + " " + flat.paths[leaf], defined));
    }
  }
  return inner;
}

std::vector<Tensor> nestedResults(const PmapOptions& options, Loc defined, const PmapTraced& traced) {
  std::vector<Tensor> results;
  size_t leaf = 0;
  for (size_t e = 0; e < traced.elementLeaves.size(); ++e) {
    const Axis axis = axisAt(options.outAxes, e, traced.elementLeaves.size(), "outAxes", options, defined);
    for (size_t k = 0; k < traced.elementLeaves[e]; ++k, ++leaf) {
      const Tensor& y = traced.outputs[leaf];
      const std::string what = who(options, defined) + " output " + (traced.names[leaf].empty() ? "0" : traced.names[leaf]);
      if (axis.kind == Axis::Kind::Replicated) {
        if (variesOver(y, options.axisName))
          throw Error(what + " " + y.typeString() + " is returned spmd::replicated, but it varies over axis '" +
                      options.axisName + "' (it is computed from the replicas' slices). Reduce it over '" +
                      options.axisName + "' before returning it (spmd::pmean or psum), or return it stacked over "
                      "the axis (outAxes 0)");
        results.push_back(y);
      } else {
        results.push_back(allGather(y, options.axisName, defined));  // [size, ...y]
      }
    }
  }
  return results;
}

}  // namespace spmd::detail
