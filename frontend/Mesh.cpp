// spmd::Mesh and shardMap's host side (frontend/Mesh.h): the mesh's coordinates and groups, the
// arguments checked against their PartitionSpecs and placed on the mesh by them (the runtime cuts
// and puts together the blocks, runtime/exec/MeshParts.h), and the mesh bound to the trace for
// the collectives.
#include "frontend/Mesh.h"

#include <algorithm>
#include <set>

#include "frontend/Trace.h"
#include "ir/Locations.h"
#include "ir/SpmdAttributes.h"
#include "passes/MeshVariation.h"
#include "runtime/exec/MeshParts.h"

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
    shape_.names.push_back(a.name), shape_.sizes.push_back(a.size);
  }
}

int64_t Mesh::size() const { return shape_.replicas(); }

int Mesh::index(const std::string& axis) const {
  const int i = shape_.index(axis);
  if (i < 0) throw Error("mesh " + describe() + " has no axis '" + axis + "'");
  return i;
}

bool Mesh::has(const std::string& axis) const { return shape_.index(axis) >= 0; }

int64_t Mesh::axisSize(const std::string& axis) const { return shape_.sizes[size_t(index(axis))]; }

int64_t Mesh::stride(const std::string& axis) const { return shape_.stride(index(axis)); }

int64_t Mesh::coordinate(int64_t replica, const std::string& axis) const {
  return shape_.coordinate(replica, index(axis));
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

AxisGroups Mesh::groups(const std::vector<std::string>& names) const {
  int64_t g = 1;
  for (const std::string& name : names) g *= axisSize(name);
  AxisGroups groups(size_t(size() / g), std::vector<int64_t>(size_t(g)));
  for (int64_t r = 0; r < size(); ++r) {
    int64_t position = 0, group = 0;
    for (const std::string& name : names) position = position * axisSize(name) + coordinate(r, name);
    for (const MeshAxis& a : axes_)
      if (std::find(names.begin(), names.end(), a.name) == names.end()) group = group * a.size + coordinate(r, a.name);
    groups[size_t(group)][size_t(position)] = r;
  }
  return groups;
}

std::string Mesh::describe() const {
  std::string text = "{";  // also before shape_ is complete, for the constructor's errors
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

std::string specText(const PartitionSpec& spec) { return runtime::specString(spec); }

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

void checkTensorArgument(const Tensor& x, const Mesh& mesh, const PartitionSpec& spec, const std::string& what) {
  if (!spec.empty()) runtime::meshPartShape(x.shape(), x.dtype(), mesh.shape(), spec, what);
}

}  // namespace

void checkArgument(const Tensor& x, const Mesh& mesh, const Spec& spec, const std::string& what) {
  checkTensorArgument(x, mesh, tensorSpec(spec, what), what);
}

void checkArgument(const Tree& x, const Mesh& mesh, const Spec& spec, const std::string& what) {
  for (const auto& [name, leaf] : x) checkTensorArgument(leaf, mesh, leafSpec(spec, x, name, what), what + " leaf '" + name + "'");
}

void readResult(const Tensor& x, const std::string& what) {
  try {
    (void)x.array();
  } catch (const Error& e) {
    throw Error(what + ": " + e.what());
  }
}

void readResult(const Tree& x, const std::string& what) {
  for (const auto& [name, leaf] : x) readResult(leaf, what + " leaf '" + name + "'");
}

Axis meshAxis(const Mesh& mesh, const Spec& spec) {
  auto on = [&](const PartitionSpec& s) {
    Axis axis(Axis::Kind::Mesh);
    axis.mesh = std::make_shared<const AxisMesh>(AxisMesh{mesh.shape(), s});
    return axis;
  };
  if (spec.byLeaf.empty()) return on(spec.all);
  std::map<std::string, Axis> leaves;
  for (const auto& [name, s] : spec.byLeaf) leaves.emplace(name, on(s));
  return perLeaf(std::move(leaves), on(spec.all));
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
  return markCollective(result, source, std::vector<std::string>{axis}, reduces, loc);
}

Tensor markCollective(const Tensor& result, const Tensor* source, const std::vector<std::string>& axes, bool reduces,
                      Loc loc) {
  Trace& trace = Trace::current("a mesh collective", loc, true);
  const passes::MeshVariation variation(trace.function());
  const uint64_t bit = variation.maskOf(axes);
  const mlir::Value from = source ? trace.valueOf(*source, loc) : mlir::Value();
  mlir::Value value = trace.valueOf(result, loc);
  mlir::Operation* def = value.getDefiningOp();
  if (!def || from == value) return result;  // nothing composed: as the source
  const uint64_t varies = from ? variation.of(from) : 0;
  def->setAttr(ir::kMeshVariesAttr, variation.attrOf(&trace.context(), reduces ? varies & ~bit : varies | bit));
  return result;
}

void bindMesh(const std::shared_ptr<const Mesh>& mesh, Loc loc, bool sumGradients) {
  Trace::current("shardMap", loc, true).bindMesh(mesh, loc, sumGradients);
}

std::vector<Tensor> sumGradientsOverCopies(const std::vector<Tensor>& primals, std::vector<Tensor> grads, Loc loc) {
  const Trace* trace = Trace::innermost();
  if (!trace || !trace->mesh() || !trace->sumsGradients()) return grads;
  for (size_t i = 0; i < primals.size() && i < grads.size(); ++i)
    for (const MeshAxis& a : trace->mesh()->axes())
      if (a.size > 1 && !variesOver(primals[i], a.name)) grads[i] = psum(grads[i], a.name, loc);
  return grads;
}

const Mesh* meshOf(const std::string& axis) {
  const Trace* trace = Trace::innermost();
  const Mesh* mesh = trace ? trace->mesh() : nullptr;
  return mesh && mesh->has(axis) ? mesh : nullptr;
}

void checkShardMapOptions(const Mesh& mesh, const ShardMapOptions& options, Loc loc) {
  const std::string at = where(loc) + ": spmd::shardMap on mesh " + mesh.describe() + ": ";
  if (!options.pmap.inAxes.empty() || !options.pmap.outAxes.empty())
    throw Error(at + "pmap.inAxes and pmap.outAxes come from inSpecs and outSpecs; leave them empty");
  if (options.pmap.accumulate != 1)
    throw Error(at + "gradient accumulation (pmap.accumulate = " + std::to_string(options.pmap.accumulate) +
                ") on a mesh is not supported; give the data axis more replicas, or loop over micro-batches in the "
                "function");
  if (options.pmap.allReplicas || options.pmap.shardUpdate || options.pmap.fullyShard)
    throw Error(at + "pmap.allReplicas, shardUpdate and fullyShard do not apply on a mesh (its values lie by their "
                "specs); leave them off");
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
