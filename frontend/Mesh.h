// A named device mesh (jax.sharding.Mesh) and spmd::shardMap (jax's shard_map): the replicas of
// one mapped axis seen as a grid of named axes, and a function mapped over it whose arguments and
// results say, per dimension, which mesh axis splits them (PartitionSpec).
//
// Mesh({{"data", 2}, {"model", 2}}) is row-major, the last axis varying fastest: over 4 devices
// replica r sits at data = r / 2, model = r % 2 (under mpirun the devices of every process, in
// process order, are the replicas). Inside a shardMap-ped function every collective takes a mesh
// axis name: psum(x, "model") folds over the replicas that share every other coordinate (the
// collective within groups, GroupedCollectives.cpp: the same bits as that collective over an axis
// of the group's replicas), axisIndex("model") is the replica's coordinate, ppermute's pairs are
// coordinates along the axis; the mesh's own name (ShardMapOptions::pmap.axisName, default
// "mesh") is the whole grid. As in jax's shard_map nothing is averaged behind the user's back:
// the gradient of a parameter is the sum, over the replicas that hold a copy of it, of each
// replica's gradient of its share of the objective (psum it over the axes its spec leaves whole).
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/Pmap.h"
#include "frontend/Processes.h"
#include "runtime/program/Program.h"

namespace spmd {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

class Mesh {
 public:
  // Names must be distinct and non-empty, sizes at least 1; errors name the caller's line.
  Mesh(std::vector<MeshAxis> axes, Loc loc = Loc::current());
  const std::vector<MeshAxis>& axes() const { return axes_; }
  int64_t size() const;  // the replicas: the product of the axis sizes
  bool has(const std::string& axis) const;
  int64_t axisSize(const std::string& axis) const;
  // Replica `replica`'s coordinate along `axis`.
  int64_t coordinate(int64_t replica, const std::string& axis) const;
  // Replicas between neighbours along `axis` (the product of the later axes' sizes).
  int64_t stride(const std::string& axis) const;
  // The replicas that share every coordinate but `axis`'s, each group in `axis` order: the
  // groups a collective over `axis` reduces within.
  AxisGroups groups(const std::string& axis) const;
  // The replicas that share every coordinate but the listed axes', each group ordered by the
  // listed axes' coordinates (the first listed the slowest): a collective over several axes.
  AxisGroups groups(const std::vector<std::string>& axes) const;
  // "{data: 2, model: 2}".
  std::string describe() const;
  // The axes' names and sizes, as a Program's call contract records them.
  const runtime::MeshShape& shape() const { return shape_; }

 private:
  int index(const std::string& axis) const;  // throws naming the mesh when absent
  std::vector<MeshAxis> axes_;
  runtime::MeshShape shape_;
};

// How a value lies on the mesh (jax.sharding.PartitionSpec): per leading dimension, the mesh axis
// that splits it ("" leaves that dimension whole); {} is the whole value on every replica. A
// dimension split over an axis of size S is cut into S equal consecutive parts, part c going to
// the replicas at coordinate c. An axis splits at most one dimension.
using PartitionSpec = std::vector<std::string>;

// An argument's or output's spec: one PartitionSpec for the value (every leaf of a Tree), or for
// a Tree one per leaf by name (Spec::leaves({{"w1", {"", "model"}}, {"b1", {"model"}}}), the
// leaves not named taking `rest`). A name that is no leaf of the Tree is an error.
struct Spec {
  PartitionSpec all;
  std::map<std::string, PartitionSpec> byLeaf = {};
  Spec(std::initializer_list<std::string> names) : all(names) {}  // NOLINT: {"data"}, {} (whole)
  Spec(PartitionSpec spec) : all(std::move(spec)) {}              // NOLINT
  static Spec leaves(std::map<std::string, PartitionSpec> byLeaf, PartitionSpec rest = {}) {
    Spec s(std::move(rest));
    s.byLeaf = std::move(byLeaf);
    return s;
  }
};

struct ShardMapOptions {
  std::vector<Spec> inSpecs;   // one per argument
  std::vector<Spec> outSpecs;  // one per output (tuple element)
  // Devices, name, memory plan, threads...: the pmap the mesh runs on. Its axisName names the
  // whole mesh (default here "mesh"); inAxes and outAxes come from the specs and must be empty.
  PmapOptions pmap = {.axisName = "mesh"};
  // Results stay on the devices, each replica holding its block (a Program's mesh placement);
  // passed to a shardMap over the same mesh and devices with the same spec they are bound in
  // place (donated too, with pmap.donateArguments), so a training loop's parameters and state
  // never leave the devices. Reading one (Tensor::array()) puts the whole value together, checks
  // the blocks a spec leaves whole are the same bits on every replica holding them, and, under
  // mpirun, gathers the other processes' blocks (every process reads it at the same point).
  // Off: every call reads its results so (the check's error comes from the call).
  bool keepOnDevices = false;
  // While tracing, each output must be invariant over the mesh axes its spec leaves whole, by
  // the per-axis replication analysis (passes/MeshVariation.h, jax's check_vma): an error at
  // trace time naming the output, the axis and the line that computed it. Off: only the check
  // of the results' bits on the host (which always runs).
  bool checkVaries = true;
  // value_and_grad inside the function returns each gradient summed over the mesh axes its
  // primal does not vary over (the replicas holding a copy of it, by the per-axis analysis): the
  // gradient of the whole objective when each replica differentiates its share of it, as
  // sumOverCopies gives by hand (and jax's shard_map through pvary's transpose). Off: each
  // replica's own gradient, summed by the user.
  bool sumGradients = false;
};

// Inside spmd::shardMap: each leaf of `grads` summed over the mesh axes its spec leaves whole,
// i.e. over the replicas that hold a copy of that parameter: the gradient of the whole objective
// when each replica differentiated its own share of it (the sum of the shares).
Tree sumOverCopies(const Tree& grads, const Spec& spec, Loc loc = Loc::current());

namespace detail {

// A shardMap argument's or result's place on the mesh (Axis::Kind::Mesh).
struct AxisMesh {
  runtime::MeshShape mesh;
  PartitionSpec spec;
};

// Checks an argument against its spec before the call: a Tensor's spec names no leaves, a Tree's
// names only its leaves, and every dimension the spec splits divides into equal parts; errors
// name `what`, the spec and what to fix.
void checkArgument(const Tensor& x, const Mesh& mesh, const Spec& spec, const std::string& what);
void checkArgument(const Tree& x, const Mesh& mesh, const Spec& spec, const std::string& what);
// Reads a result on the mesh now (the whole value put together and checked, kept with the
// tensor); errors are prefixed with `what`.
void readResult(const Tensor& x, const std::string& what);
void readResult(const Tree& x, const std::string& what);

// Binds `mesh` to the trace being built (spmd::shardMap's body does so before the user's
// function): collectives then take its axis names.
void bindMesh(const std::shared_ptr<const Mesh>& mesh, Loc loc, bool sumGradients);
// The mesh bound to the innermost trace when `axis` is one of its axes, else null.
const Mesh* meshOf(const std::string& axis);
// Replica groups of the mapped `axis` checked (equal sizes, every replica once; errors name the
// collective `what`, the group and the replica at the caller's line) and flattened.
std::vector<int64_t> checkedGroups(const AxisGroups& groups, const std::string& axis, const char* what, Loc loc);

// Marks the traced arguments' per-axis variation from their specs (the axes a spec splits a
// value over), so the analysis starts from them.
void markArgument(const Tensor& x, const Spec& spec, const std::string& what);
void markArgument(const Tree& x, const Spec& spec, const std::string& what);
// Throws (naming `what`, the axis and the line that computed it) when an output varies over a
// mesh axis its spec leaves whole.
void checkOutput(const Tensor& x, const Spec& spec, const std::string& what);
void checkOutput(const Tree& x, const Spec& spec, const std::string& what);
// With ShardMapOptions::sumGradients in the innermost trace: each of `grads` (value_and_grad's,
// one per primal) psum-ed over the mesh axes its primal does not vary over; else `grads`.
std::vector<Tensor> sumGradientsOverCopies(const std::vector<Tensor>& primals, std::vector<Tensor> grads, Loc loc);
// Whether `x`, traced in a function over a mesh, varies over mesh axis `axis` (false outside one).
bool variesOver(const Tensor& x, const std::string& axis);
// Marks `result`, a collective over mesh axis `axis` just composed from `source`, with the axes
// it varies over: `source`'s less `axis` (`reduces`: psum, allGather, ...) or plus it
// (psumScatter, ppermute; a null `source`: axisIndex). Returns `result`.
Tensor markCollective(const Tensor& result, const Tensor* source, const std::string& axis, bool reduces, Loc loc);
Tensor markCollective(const Tensor& result, const Tensor* source, const std::vector<std::string>& axes, bool reduces,
                      Loc loc);
template <typename F>
struct MeshBody {
  F f;
  std::shared_ptr<const Mesh> mesh;
  Loc defined;
  std::vector<Spec> inSpecs, outSpecs;
  bool checkVaries = true;
  bool sumGradients = false;
  std::string who;  // "spmd::shardMap 'name'"

  template <typename... Args>
  auto operator()(const Args&... args) const {
    bindMesh(mesh, defined, sumGradients);
    markArguments(std::index_sequence_for<Args...>(), args...);
    auto out = f(args...);
    if constexpr (IsTuple<decltype(out)>::value) {
      if (checkVaries) checkOutputs(out, std::make_index_sequence<std::tuple_size_v<decltype(out)>>());
    } else {
      if (checkVaries && !outSpecs.empty()) checkOutput(out, outSpecs[0], who + " output 0");
    }
    return out;  // each replica's block; the caller receives the whole (a mesh placement)
  }

 private:
  template <size_t... I, typename... Args>
  void markArguments(std::index_sequence<I...>, const Args&... args) const {
    if (inSpecs.size() == sizeof...(Args)) (markArgument(args, inSpecs[I], who + " argument " + std::to_string(I)), ...);
  }
  template <typename Out, size_t... I>
  void checkOutputs(const Out& out, std::index_sequence<I...>) const {
    if (outSpecs.size() == sizeof...(I))
      (checkOutput(std::get<I>(out), outSpecs[I], who + " output " + std::to_string(I)), ...);
  }
};

template <typename Out, size_t... I>
void readResults(const Out& out, const std::string& who, std::index_sequence<I...>) {
  (readResult(std::get<I>(out), who + " output " + std::to_string(I)), ...);
}

// The pmap axis of an argument or result with `spec` (per leaf with Spec::leaves).
Axis meshAxis(const Mesh& mesh, const Spec& spec);
void checkShardMapOptions(const Mesh& mesh, const ShardMapOptions& options, Loc loc);
void checkShardMapCall(const Mesh& mesh, const ShardMapOptions& options, size_t arguments, size_t outputs,
                       int globalDevices, const std::string& who);

}  // namespace detail

template <typename F>
class ShardMapped {
 public:
  ShardMapped(F f, Mesh mesh, ShardMapOptions options, Loc defined)
      : mesh_(std::make_shared<const Mesh>(std::move(mesh))), options_(std::move(options)),
        pmapped_(detail::MeshBody<F>{std::move(f), mesh_, defined, options_.inSpecs, options_.outSpecs,
                                     options_.checkVaries, options_.sumGradients,
                                     "spmd::shardMap '" + options_.pmap.name + "'"},
                 pmapOptions(*mesh_, options_, defined), defined) {}

  template <typename... Args>
  auto operator()(const Args&... args) {
    using Out = std::decay_t<decltype(pmapped_(args...))>;
    size_t outputs = 1;
    if constexpr (detail::IsTuple<Out>::value) outputs = std::tuple_size_v<Out>;
    const std::string who = "spmd::shardMap '" + options_.pmap.name + "'";
    detail::checkShardMapCall(*mesh_, options_, sizeof...(Args), outputs, pmapped_.globalDeviceCount(), who);
    checkArguments(who, std::index_sequence_for<Args...>(), args...);
    Out out = pmapped_(args...);
    if (!options_.keepOnDevices) {
      if constexpr (detail::IsTuple<Out>::value)
        detail::readResults(out, who, std::make_index_sequence<std::tuple_size_v<Out>>());
      else
        detail::readResult(out, who + " output 0");
    }
    return out;
  }

  const Mesh& mesh() const { return *mesh_; }
  // The last call's counts (arguments bound in place, graphs, ...) and compiled Program (its
  // call contract shows each argument's and result's mesh placement).
  runtime::CallCounts lastCall() const { return pmapped_.lastCall(); }
  const runtime::Program& lastProgram() const { return pmapped_.lastProgram(); }
  std::string lastDumpDir() const { return pmapped_.lastDumpDir(); }  // with pmap.dumpDir

 private:
  template <size_t... I, typename... Args>
  void checkArguments(const std::string& who, std::index_sequence<I...>, const Args&... args) const {
    (detail::checkArgument(args, *mesh_, options_.inSpecs[I], who + " argument " + std::to_string(I)), ...);
  }

  static PmapOptions pmapOptions(const Mesh& mesh, const ShardMapOptions& options, Loc loc) {
    detail::checkShardMapOptions(mesh, options, loc);
    PmapOptions pmap = options.pmap;
    // Arguments and results on the mesh by their specs (the Program's mesh placements): the
    // runtime cuts each replica's block from the whole, and puts results together when read. A
    // whole value ({}) is a copy on every replica, so a result kept on the devices is bound in
    // place as the same argument. No value is averaged behind the user's back: a pmean the
    // compiler would insert is an error.
    for (const Spec& spec : options.inSpecs) pmap.inAxes.push_back(detail::meshAxis(mesh, spec));
    for (const Spec& spec : options.outSpecs) pmap.outAxes.push_back(detail::meshAxis(mesh, spec));
    pmap.strict = true;
    return pmap;
  }

  std::shared_ptr<const Mesh> mesh_;
  ShardMapOptions options_;
  Pmapped<detail::MeshBody<F>> pmapped_;
};

// Bad meshes and specs are reported here, at the caller's line, before the first call.
template <typename F>
ShardMapped<F> shardMap(F f, Mesh mesh, ShardMapOptions options, Loc loc = Loc::current()) {
  return ShardMapped<F>(std::move(f), std::move(mesh), std::move(options), loc);
}

}  // namespace spmd
