// spmd::Mesh and shardMap's host side (frontend/Mesh.h): the mesh's coordinates and groups, the
// arguments cut into the replicas' parts by their PartitionSpecs, the results put together from
// them, and the mesh bound to the trace for the collectives.
#include "frontend/Mesh.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "frontend/Trace.h"
#include "ir/Locations.h"
#include "ir/SpmdAttributes.h"
#include "passes/MeshVariation.h"

namespace spmd {

Mesh::Mesh(std::vector<MeshAxis> axes, Loc loc) : axes_(std::move(axes)) {
  const std::string at = detail::where(loc) + ": spmd::Mesh " + describe() + ": ";
  if (axes_.empty()) throw Error(at + "a mesh needs at least one axis, e.g. {{\"data\", 4}}");
  std::set<std::string> names;
  for (const MeshAxis& a : axes_) {
    if (a.name.empty()) throw Error(at + "an axis has no name; name each axis (\"data\", \"model\")");
    if (!names.insert(a.name).second) throw Error(at + "axis '" + a.name + "' is named twice; names must differ");
    if (a.size < 1)
      throw Error(at + "axis '" + a.name + "' has size " + std::to_string(a.size) + "; every axis needs at least 1");
  }
}

int64_t Mesh::size() const {
  int64_t n = 1;
  for (const MeshAxis& a : axes_) n *= a.size;
  return n;
}

int64_t Mesh::index(const std::string& axis) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == axis) return int64_t(i);
  return -1;
}

bool Mesh::has(const std::string& axis) const { return index(axis) >= 0; }

int64_t Mesh::axisSize(const std::string& axis) const {
  const int64_t i = index(axis);
  if (i < 0) throw Error("mesh " + describe() + " has no axis '" + axis + "'");
  return axes_[size_t(i)].size;
}

int64_t Mesh::stride(const std::string& axis) const {
  const int64_t i = index(axis);
  if (i < 0) throw Error("mesh " + describe() + " has no axis '" + axis + "'");
  int64_t stride = 1;
  for (size_t k = size_t(i) + 1; k < axes_.size(); ++k) stride *= axes_[k].size;
  return stride;
}

int64_t Mesh::coordinate(int64_t replica, const std::string& axis) const {
  return replica / stride(axis) % axisSize(axis);
}

AxisGroups Mesh::groups(const std::string& axis) const {
  const int64_t n = size(), s = axisSize(axis), stride = this->stride(axis);
  AxisGroups groups;
  for (int64_t r = 0; r < n; ++r) {
    if (coordinate(r, axis) != 0) continue;  // r leads its group
    std::vector<int64_t> group;
    for (int64_t c = 0; c < s; ++c) group.push_back(r + c * stride);
    groups.push_back(std::move(group));
  }
  return groups;
}

std::string Mesh::describe() const {
  std::string text = "{";
  for (size_t i = 0; i < axes_.size(); ++i)
    text += (i ? ", " : "") + axes_[i].name + ": " + std::to_string(axes_[i].size);
  return text + "}";
}

Tree sumOverCopies(const Tree& grads, const Spec& spec, Loc loc) {
  const detail::Trace& trace = detail::Trace::current("sumOverCopies", loc, true);
  const Mesh* mesh = trace.mesh();
  if (!mesh) throw Error(detail::where(loc) + ": spmd::sumOverCopies needs the mesh of an enclosing spmd::shardMap");
  Tree out;
  for (const auto& [name, g] : grads) {
    auto it = spec.byLeaf.find(name);
    const PartitionSpec& split = it == spec.byLeaf.end() ? spec.all : it->second;
    Tensor sum = g;
    for (const MeshAxis& a : mesh->axes())
      if (std::find(split.begin(), split.end(), a.name) == split.end()) sum = psum(sum, a.name, loc);
    out.set(name, sum);
  }
  return out;
}

namespace detail {
namespace {

std::string specText(const PartitionSpec& spec) {
  std::string text = "{";
  for (size_t d = 0; d < spec.size(); ++d) text += (d ? ", " : "") + ("\"" + spec[d] + "\"");
  return text + "}";
}

// The spec checked against the mesh and a value of `shape`; returns, per dimension, the size of
// the axis splitting it (1 where whole).
std::vector<int64_t> partsOf(const Mesh& mesh, const PartitionSpec& spec, const Shape& shape, const std::string& what,
                             const std::string& type) {
  const std::string at = what + " " + type + " with spec " + specText(spec) + " on mesh " + mesh.describe() + ": ";
  if (spec.size() > shape.size())
    throw Error(at + "the spec names " + std::to_string(spec.size()) + " dimensions but the value has " +
                std::to_string(shape.size()) + "; give at most one entry per dimension");
  std::vector<int64_t> parts(shape.size(), 1);
  for (size_t d = 0; d < spec.size(); ++d) {
    if (spec[d].empty()) continue;
    const int64_t s = mesh.axisSize(spec[d]);
    if (shape[d] % s != 0)
      throw Error(at + "dimension " + std::to_string(d) + " (" + std::to_string(shape[d]) + ") does not split into " +
                  std::to_string(s) + " equal parts over axis '" + spec[d] + "'; make it a multiple of " +
                  std::to_string(s));
    parts[d] = s;
  }
  return parts;
}

// Copies the box of `local` shape at `offset` in `whole` to or from `part`: row by row along the
// last dimension (toPart: whole -> part).
void copyBox(const Array& whole, const Shape& offset, std::byte* part, const Shape& local, bool toPart) {
  const size_t e = dtypeSize(whole.dtype), rank = local.size();
  if (numElements(local) == 0) return;
  const Shape strides = rowMajorStrides(whole.shape);
  const int64_t row = rank ? local[rank - 1] : 1;
  std::vector<int64_t> index(rank, 0);
  const int64_t rows = numElements(local) / row;
  auto* base = const_cast<std::byte*>(whole.data());
  for (int64_t r = 0; r < rows; ++r) {
    int64_t at = 0;
    for (size_t k = 0; k < rank; ++k) at += (index[k] + offset[k]) * strides[k];
    std::byte* w = base + size_t(at) * e;
    std::byte* p = part + size_t(r * row) * e;
    if (toPart) std::memcpy(p, w, size_t(row) * e);
    else std::memcpy(w, p, size_t(row) * e);
    for (int64_t k = int64_t(rank) - 2; k >= 0; --k) {
      if (++index[size_t(k)] < local[size_t(k)]) break;
      index[size_t(k)] = 0;
    }
  }
}

// Where replica r's part starts in the whole value.
Shape offsetOf(const Mesh& mesh, const PartitionSpec& spec, const Shape& local, int64_t r) {
  Shape offset(local.size(), 0);
  for (size_t d = 0; d < spec.size(); ++d)
    if (!spec[d].empty()) offset[d] = mesh.coordinate(r, spec[d]) * local[d];
  return offset;
}

}  // namespace

namespace {

// A Tensor's PartitionSpec: `all` (a per-leaf spec is for Trees).
const PartitionSpec& tensorSpec(const Spec& spec, const std::string& what) {
  if (!spec.byLeaf.empty())
    throw Error(what + " is a tensor, but its spec names leaves (Spec::leaves, '" + spec.byLeaf.begin()->first +
                "'); give it one PartitionSpec");
  return spec.all;
}

// A Tree leaf's PartitionSpec; every leaf the spec names must be in the tree.
const PartitionSpec& leafSpec(const Spec& spec, const Tree& tree, const std::string& leaf, const std::string& what) {
  for (const auto& [name, s] : spec.byLeaf)
    if (!tree.contains(name))
      throw Error(what + ": its spec names leaf '" + name + "', which the tree does not have");
  auto it = spec.byLeaf.find(leaf);
  return it == spec.byLeaf.end() ? spec.all : it->second;
}

// `stack`: stacked even when whole (a leaf of a Tree other leaves of which are split).
Tensor shardTensor(const Tensor& x, const Mesh& mesh, const PartitionSpec& spec, LocalReplicas replicas,
                   const std::string& what, bool stack = false) {
  if (spec.empty() && !stack) return x;
  const Array& whole = x.array();
  const std::vector<int64_t> parts = partsOf(mesh, spec, whole.shape, what, x.typeString());
  Shape local = whole.shape;
  for (size_t d = 0; d < local.size(); ++d) local[d] /= parts[d];
  Shape stacked{replicas.count};
  stacked.insert(stacked.end(), local.begin(), local.end());
  Array out = Array::zeros(whole.dtype, stacked);
  const size_t partBytes = size_t(numElements(local)) * dtypeSize(whole.dtype);
  for (int64_t r = 0; r < replicas.count; ++r)
    copyBox(whole, offsetOf(mesh, spec, local, replicas.first + r), out.data() + size_t(r) * partBytes, local, true);
  return Tensor(std::move(out));
}

}  // namespace

Tensor shardArgument(const Tensor& x, const Mesh& mesh, const Spec& spec, LocalReplicas replicas,
                     const std::string& what) {
  return shardTensor(x, mesh, tensorSpec(spec, what), replicas, what);
}

// A Tree argument is stacked as a whole (pmap maps an argument's leaves alike): a leaf whose
// spec is {} is repeated on every replica.
Tree shardArgument(const Tree& x, const Mesh& mesh, const Spec& spec, LocalReplicas replicas, const std::string& what) {
  Tree out;
  for (const auto& [name, leaf] : x) {
    const std::string at = what + " leaf '" + name + "'";
    const bool stacked = !spec.all.empty() || !spec.byLeaf.empty();
    out.set(name, shardTensor(leaf, mesh, leafSpec(spec, x, name, what), replicas, at, stacked));
  }
  return out;
}

namespace {

// The names of the axes `spec` splits a value over.
std::vector<std::string> splitAxes(const PartitionSpec& spec) {
  std::vector<std::string> axes;
  for (const std::string& axis : spec)
    if (!axis.empty()) axes.push_back(axis);
  return axes;
}

void markTensor(const Tensor& x, const PartitionSpec& spec) {
  Trace* trace = Trace::innermost();
  if (!trace || !x.isTraced()) return;
  auto arg = llvm::dyn_cast<mlir::BlockArgument>(trace->valueOf(x, Loc::current()));
  mlir::func::FuncOp function = trace->function();
  if (!arg || arg.getOwner() != &function.getBody().front()) return;  // not an argument: the analysis derives it
  std::vector<mlir::Attribute> names;
  for (const std::string& axis : splitAxes(spec)) names.push_back(trace->builder().getStringAttr(axis));
  function.setArgAttr(arg.getArgNumber(), ir::kMeshVariesAttr, trace->builder().getArrayAttr(names));
}

void checkTensor(const Tensor& x, const PartitionSpec& spec, const std::string& what) {
  Trace* trace = Trace::innermost();
  if (!trace || !trace->mesh() || !x.isTraced()) return;
  const passes::MeshVariation variation(trace->function());
  mlir::Value value = trace->valueOf(x, Loc::current());
  const uint64_t whole = ~variation.maskOf(splitAxes(spec)), bad = variation.of(value) & whole;
  if (!bad) return;
  const std::vector<std::string> axes = variation.namesOf(bad);
  std::string named;
  for (size_t i = 0; i < axes.size(); ++i) named += (i ? (i + 1 == axes.size() ? " and '" : ", '") : "'") + axes[i] + "'";
  std::string line;
  if (mlir::Operation* def = value.getDefiningOp()) line = sourceLine(def->getLoc());
  const std::string axis = axes[0];
  throw Error(what + " " + x.typeString() + (line.empty() ? "" : " (computed at " + line + ")") + " varies over mesh axis " +
              named + ": it is computed from values that differ between replicas along it, but its spec " +
              specText(spec) + " leaves it whole there. Reduce it over '" + axis + "' before returning it "
              "(spmd::psum or pmean; spmd::sumOverCopies for gradients), or split a dimension of it over '" + axis +
              "' in outSpecs; ShardMapOptions::checkVaries = false keeps only the check of the results' bits");
}

}  // namespace

void markArgument(const Tensor& x, const Spec& spec, const std::string& what) { markTensor(x, tensorSpec(spec, what)); }

void markArgument(const Tree& x, const Spec& spec, const std::string& what) {
  for (const auto& [name, leaf] : x) markTensor(leaf, leafSpec(spec, x, name, what));
}

void checkOutput(const Tensor& x, const Spec& spec, const std::string& what) { checkTensor(x, tensorSpec(spec, what), what); }

void checkOutput(const Tree& x, const Spec& spec, const std::string& what) {
  for (const auto& [name, leaf] : x) checkTensor(leaf, leafSpec(spec, x, name, what), what + " leaf '" + name + "'");
}

bool variesOver(const Tensor& x, const std::string& axis) {
  Trace* trace = Trace::innermost();
  if (!trace || !trace->mesh() || !trace->mesh()->has(axis) || !x.isTraced()) return false;
  const passes::MeshVariation variation(trace->function());
  return (variation.of(trace->valueOf(x, Loc::current())) & variation.maskOf(std::vector<std::string>{axis})) != 0;
}

Tensor markCollective(const Tensor& result, const Tensor* source, const std::string& axis, bool reduces, Loc loc) {
  Trace& trace = Trace::current("a mesh collective", loc, true);
  const passes::MeshVariation variation(trace.function());
  const uint64_t bit = variation.maskOf(std::vector<std::string>{axis});
  const mlir::Value from = source ? trace.valueOf(*source, loc) : mlir::Value();
  mlir::Value value = trace.valueOf(result, loc);
  mlir::Operation* def = value.getDefiningOp();
  if (!def || from == value) return result;  // nothing composed: as the source
  const uint64_t axes = from ? variation.of(from) : 0;
  def->setAttr(ir::kMeshVariesAttr, variation.attrOf(&trace.context(), reduces ? axes & ~bit : axes | bit));
  return result;
}

Tensor gatherParts(const Tensor& part, const std::string& mapped, Loc loc) { return allGather(part, mapped, loc); }

Tree gatherParts(const Tree& part, const std::string& mapped, Loc loc) {
  Tree out;
  for (const auto& [name, leaf] : part) out.set(name, allGather(leaf, mapped, loc));
  return out;
}

namespace {

Tensor assembleTensor(const Tensor& parts, const Mesh& mesh, const PartitionSpec& spec, const std::string& what) {
  const Array& all = parts.array();
  const Shape local(all.shape.begin() + 1, all.shape.end());
  if (spec.size() > local.size())
    throw Error(what + " " + parts.typeString() + ": its spec " + specText(spec) + " names " +
                std::to_string(spec.size()) + " dimensions but each replica's part has " +
                std::to_string(local.size()) + "; give at most one entry per dimension");
  Shape whole = local;
  for (size_t d = 0; d < spec.size(); ++d)
    if (!spec[d].empty()) whole[d] *= mesh.axisSize(spec[d]);
  Array out = Array::zeros(all.dtype, whole);
  const size_t partBytes = size_t(numElements(local)) * dtypeSize(all.dtype);
  std::set<std::string> split(spec.begin(), spec.end());
  // Each part is taken from the replica at coordinate 0 on every axis that does not split the
  // value; the replicas that differ from it only there must hold the same bits.
  for (int64_t r = 0; r < mesh.size(); ++r) {
    int64_t owner = r;
    for (const MeshAxis& a : mesh.axes())
      if (!split.count(a.name)) owner -= mesh.coordinate(r, a.name) * mesh.stride(a.name);
    const std::byte* mine = all.data() + size_t(r) * partBytes;
    if (owner == r) {
      copyBox(out, offsetOf(mesh, spec, local, r), const_cast<std::byte*>(mine), local, false);
      continue;
    }
    const std::byte* theirs = all.data() + size_t(owner) * partBytes;
    if (std::memcmp(mine, theirs, partBytes) != 0) {
      std::string axes;
      for (const MeshAxis& a : mesh.axes())
        if (!split.count(a.name) && mesh.coordinate(r, a.name) != 0) axes += (axes.empty() ? "'" : ", '") + a.name + "'";
      throw Error(what + " " + parts.typeString() + " (per replica) is whole over mesh axis " + axes + " by its spec " +
                  specText(spec) + ", but replicas " + std::to_string(owner) + " and " + std::to_string(r) +
                  " of mesh " + mesh.describe() + " hold different values; reduce it over that axis (psum, pmean) "
                  "before returning it, or split a dimension over the axis in outSpecs");
    }
  }
  return Tensor(std::move(out));
}

}  // namespace

Tensor assembleResult(const Tensor& parts, const Mesh& mesh, const Spec& spec, const std::string& what) {
  return assembleTensor(parts, mesh, tensorSpec(spec, what), what);
}

Tree assembleResult(const Tree& parts, const Mesh& mesh, const Spec& spec, const std::string& what) {
  Tree out;
  for (const auto& [name, leaf] : parts)
    out.set(name, assembleTensor(leaf, mesh, leafSpec(spec, parts, name, what), what + " leaf '" + name + "'"));
  return out;
}

void bindMesh(const std::shared_ptr<const Mesh>& mesh, Loc loc) { Trace::current("shardMap", loc, true).bindMesh(mesh, loc); }

const Mesh* meshOf(const std::string& axis) {
  const Trace* trace = Trace::innermost();
  const Mesh* mesh = trace ? trace->mesh() : nullptr;
  return mesh && mesh->has(axis) ? mesh : nullptr;
}

void checkShardMapOptions(const Mesh& mesh, const ShardMapOptions& options, Loc loc) {
  const std::string at = where(loc) + ": spmd::shardMap on mesh " + mesh.describe() + ": ";
  if (!options.pmap.inAxes.empty() || !options.pmap.outAxes.empty())
    throw Error(at + "pmap.inAxes and pmap.outAxes come from inSpecs and outSpecs; leave them empty");
  if (options.outSpecs.empty())
    throw Error(at + "outSpecs is empty; give one PartitionSpec per output ({} for a whole value)");
  if (mesh.has(options.pmap.axisName))
    throw Error(at + "pmap.axisName '" + options.pmap.axisName +
                "' names the whole mesh and must differ from its axes' names");
  auto checkOne = [&](const PartitionSpec& spec, const std::string& which) {
    std::set<std::string> used;
    for (const std::string& axis : spec) {
      if (axis.empty()) continue;
      if (!mesh.has(axis))
        throw Error(at + which + " " + specText(spec) + " names axis '" + axis + "', which the mesh does not have");
      if (!used.insert(axis).second)
        throw Error(at + which + " " + specText(spec) + " splits two dimensions over axis '" + axis +
                    "'; an axis splits at most one dimension");
    }
  };
  auto check = [&](const std::vector<Spec>& specs, const char* which) {
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string name = std::string(which) + "[" + std::to_string(i) + "]";
      checkOne(specs[i].all, name);
      for (const auto& [leaf, spec] : specs[i].byLeaf) checkOne(spec, name + " leaf '" + leaf + "'");
    }
  };
  check(options.inSpecs, "inSpecs");
  check(options.outSpecs, "outSpecs");
}

void checkShardMapCall(const Mesh& mesh, const ShardMapOptions& options, size_t arguments, size_t outputs,
                       int globalDevices, const std::string& who) {
  if (options.inSpecs.size() != arguments)
    throw Error(who + ": called with " + std::to_string(arguments) + " argument(s) but inSpecs has " +
                std::to_string(options.inSpecs.size()) + "; give one PartitionSpec per argument");
  if (options.outSpecs.size() != outputs)
    throw Error(who + ": the function returns " + std::to_string(outputs) + " output(s) but outSpecs has " +
                std::to_string(options.outSpecs.size()) + "; give one PartitionSpec per output");
  if (mesh.size() != globalDevices)
    throw Error(who + ": mesh " + mesh.describe() + " has " + std::to_string(mesh.size()) + " replicas but the job has " +
                std::to_string(globalDevices) + " devices; make the axis sizes multiply to the device count");
}

}  // namespace detail
}  // namespace spmd
