// Collectives over several mesh axes at once (Axes{...}): the mapped axis' collective within the
// groups of replicas that share every other axis' coordinate (Mesh::groups of the axes), marked
// invariant (or, for psumScatter, varying) over every listed axis.
#include <algorithm>

#include "frontend/Collectives.h"
#include "frontend/Mesh.h"
#include "frontend/Ops.h"
#include "frontend/Trace.h"

namespace spmd {
namespace {

std::string axesText(const Axes& axes) {
  std::string text = "(";
  for (size_t i = 0; i < axes.names.size(); ++i) text += (i ? ", " : "") + axes.names[i];
  return text + ")";
}

// The bound mesh, once every listed axis is checked to be one of its axes, listed once.
const Mesh& meshOfAxes(const Axes& axes, const char* what, Loc loc) {
  const std::string at = detail::where(loc) + ": spmd::" + what + " over axes " + axesText(axes) + ": ";
  const detail::Trace* trace = detail::Trace::innermost();
  const Mesh* mesh = trace ? trace->mesh() : nullptr;
  if (!mesh)
    throw Error(at + "several axes name the axes of a mesh, and no spmd::shardMap is being traced; inside pmap "
                "name its one axis");
  if (axes.names.empty()) throw Error(at + "no axis is listed; list one or more of the mesh " + mesh->describe() + "'s axes");
  for (size_t i = 0; i < axes.names.size(); ++i) {
    if (!mesh->has(axes.names[i]))
      throw Error(at + "'" + axes.names[i] + "' is not an axis of the mesh " + mesh->describe());
    if (std::find(axes.names.begin(), axes.names.begin() + int64_t(i), axes.names[i]) != axes.names.begin() + int64_t(i))
      throw Error(at + "axis '" + axes.names[i] + "' is listed twice; list each axis once");
  }
  return *mesh;
}

std::string mappedAxisOf(const char* what, Loc loc) { return detail::Trace::current(what, loc, true).axisName(); }

using GroupedReduction = Tensor (*)(const Tensor&, const std::string&, const AxisGroups&, Loc);

Tensor reduceOver(const Tensor& x, const Axes& axes, GroupedReduction reduce, const char* what, Loc loc) {
  const Mesh& mesh = meshOfAxes(axes, what, loc);
  return detail::markCollective(reduce(x, mappedAxisOf(what, loc), mesh.groups(axes.names), loc), &x, axes.names, true,
                                loc);
}

Tree reduceTreeOver(const Tree& x, const Axes& axes, GroupedReduction reduce, const char* what, Loc loc) {
  Tree out;
  for (const auto& [name, leaf] : x) out.set(name, reduceOver(leaf, axes, reduce, what, loc));
  return out;
}

}  // namespace

Tensor psum(const Tensor& x, const Axes& axes, Loc loc) { return reduceOver(x, axes, &psum, "psum", loc); }
Tensor pmean(const Tensor& x, const Axes& axes, Loc loc) { return reduceOver(x, axes, &pmean, "pmean", loc); }
Tensor pmax(const Tensor& x, const Axes& axes, Loc loc) { return reduceOver(x, axes, &pmax, "pmax", loc); }
Tensor pmin(const Tensor& x, const Axes& axes, Loc loc) { return reduceOver(x, axes, &pmin, "pmin", loc); }
Tree psum(const Tree& x, const Axes& axes, Loc loc) { return reduceTreeOver(x, axes, &psum, "psum", loc); }
Tree pmean(const Tree& x, const Axes& axes, Loc loc) { return reduceTreeOver(x, axes, &pmean, "pmean", loc); }

Tensor allGather(const Tensor& x, const Axes& axes, Loc loc) {
  const Mesh& mesh = meshOfAxes(axes, "allGather", loc);
  return detail::markCollective(allGather(x, mappedAxisOf("allGather", loc), mesh.groups(axes.names), loc), &x,
                                axes.names, true, loc);
}

Tensor psumScatter(const Tensor& x, const Axes& axes, Loc loc) {
  const Mesh& mesh = meshOfAxes(axes, "psumScatter", loc);
  return detail::markCollective(psumScatter(x, mappedAxisOf("psumScatter", loc), mesh.groups(axes.names), loc), &x,
                                axes.names, false, loc);
}

// The replica's position in its group: from a table by the mapped axis' index.
Tensor axisIndex(const Axes& axes, Loc loc) {
  const Mesh& mesh = meshOfAxes(axes, "axisIndex", loc);
  std::vector<float> positions(size_t(mesh.size()));
  for (const std::vector<int64_t>& group : mesh.groups(axes.names))
    for (size_t p = 0; p < group.size(); ++p) positions[size_t(group[p])] = float(p);
  Tensor table = Tensor(Array::of<float>({mesh.size(), 1}, positions));
  Tensor me = reshape(axisIndex(mappedAxisOf("axisIndex", loc), loc), {1}, loc);
  return detail::markCollective(cast(reshape(embedding(table, me, loc), {}, loc), DType::i32, loc), nullptr, axes.names,
                                false, loc);
}

int64_t axisSize(const Axes& axes, Loc loc) {
  const Mesh& mesh = meshOfAxes(axes, "axisSize", loc);
  int64_t size = 1;
  for (const std::string& name : axes.names) size *= mesh.axisSize(name);
  return size;
}

}  // namespace spmd
