// spmd::pmap: the function runs as one replica per device (jax.pmap's model). Arguments are
// replicated, stacked per device ([devices, local_batch, ...], in_axes 0) or split from a global
// batch ([devices * local_batch, ...], spmd::split); the traced function sees one replica's
// shapes. The compiler keeps replicated outputs replicated (inserting pmean where needed,
// spmd-insert-pmean) and the step is compiled once per signature and cached.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/Collectives.h"
#include "frontend/CompileLog.h"
#include "frontend/Flatten.h"

namespace spmd {
namespace runtime {
class Device;
class ReplicaGroup;
struct AccumulationSplit;
}

namespace detail {
struct AxisMesh;  // frontend/Mesh.h
}

// How an argument or output is spread over the devices.
struct Axis {
  enum class Kind { Replicated, Stacked, Split, Mesh };
  Kind kind = Kind::Replicated;
  int dim = 0;
  // Kind::Mesh (spmd::shardMap's arguments and results): the whole value, each replica holding
  // the block its coordinates on this mesh select by this PartitionSpec.
  std::shared_ptr<const detail::AxisMesh> mesh = {};
  // A Tree's leaves by name, each its own Axis (jax's in_axes / out_axes as a tree prefix); the
  // leaves not named take this Axis' kind and dim. Made by spmd::perLeaf.
  std::shared_ptr<const std::map<std::string, Axis>> leaves = {};
  // Stacked over dimension `dim` (jax.pmap's in_axes / out_axes integer; negative: from the last).
  // Another than 0 is moved to lead on the host (a copy), and such an output is a host tensor.
  Axis(int d) : kind(Kind::Stacked), dim(d) {}  // NOLINT: in_axes = {0, spmd::replicated}
  explicit Axis(Kind k) : kind(k) {}
};
// The same value on every device (parameters, optimizer state).
inline const Axis replicated{Axis::Kind::Replicated};
// A global batch [devices * local_batch, ...], split into consecutive per-device chunks.
inline const Axis split{Axis::Kind::Split};
// A Tree argument's or output's axes leaf by leaf: perLeaf({{"bn.mean", spmd::replicated}}, 0)
// stacks every leaf but bn.mean. A name that is no leaf of the Tree is an error at the call.
inline Axis perLeaf(std::map<std::string, Axis> byLeaf, Axis rest = replicated) {
  for (const auto& [name, axis] : byLeaf)
    if (axis.leaves) throw Error("spmd::perLeaf: leaf '" + name + "' is given leaves of its own; give it one Axis");
  rest.leaves = std::make_shared<const std::map<std::string, Axis>>(std::move(byLeaf));
  return rest;
}

struct PmapOptions {
  std::string axisName = "batch";
  std::vector<Axis> inAxes = {};   // one per argument; empty: every argument stacked on axis 0
  std::vector<Axis> outAxes = {};  // one per output (tuple element); empty: all replicated
  std::string devices = {};        // "cpu:4"; empty: $SPMD_DEVICES, else "cpu:1"
  // Report every pmean the compiler would insert as an error instead (names output and line).
  bool strict = false;
  // Return replicated outputs from every replica, stacked [devices, ...], instead of once.
  bool allReplicas = false;
  double collectiveTimeoutSeconds = 0;  // 0: $SPMD_COLLECTIVE_TIMEOUT, else 300 s
  int64_t bucketBytes = 25 << 20;       // largest combined gradient all-reduce
  // Largest combined reduce-scatter or all-gather of shardUpdate / fullyShard (fewer collectives
  // against a bucket's gradients or gathered parameters held together).
  int64_t shardedBucketBytes = 4 << 20;
  std::string name = "main";
  std::string dumpDir = {};  // per-pass IR dumps; empty: SPMD_DUMP_IR
  bool planMemory = true;  // intermediates share one arena per replica by lifetime
  bool fuseElementwise = true;  // elementwise chains run as fused kernels
  // Activations in the backend's blocked layout where its kernels take it (the CPU backend's
  // oneDNN nChw8c/nChw16c), converted only where needed; off: every tensor plain NCHW.
  bool assignLayouts = true;
  // Stop at the first op whose output holds NaN (Inf), naming it, its layer, line and replica;
  // also SPMD_DEBUG_NANS=1 (SPMD_DEBUG_INFS=1). Slow: runs unfused and scans every output.
  bool debugNans = false, debugInfs = false;
  // Arguments (by position) whose device-resident values the call may reuse for its outputs
  // (jax's donate_argnums): parameters and optimizer state are then updated in place, and the
  // donated tensors can no longer be used. Arguments on the host are never donated.
  std::vector<int> donateArguments = {};
  // Host threads each replica's kernels run with (the cpu backend's OpenMP threads, which change
  // oneDNN's rounding, so a run's bits depend on the replica count and this number). 0: the
  // default share (runtime::cpuThreadShare: SPMD_THREADS_PER_REPLICA, else the cores
  // divided among every replica on this host).
  int threadsPerReplica = 0;
  // Drift check: every this many calls, compare every replicated output's bits across all
  // replicas of all processes (checkReplicasAgree, frontend/Agreement.h); a mismatch stops the
  // call with an error naming the tensor, replicas and first differing element. 0: never.
  int64_t driftCheckEvery = 0;
  // Gradient accumulation: each replica runs its local batch as this many micro-batches of
  // local_batch / accumulate rows, in turn or some at once (microBatchesAtOnce), as virtual
  // replicas replica * accumulate + step (which axis_index returns), and applies the update once. The result is the same bits as
  // devices x processes x accumulate replicas with the same global batch: gradients, loss, BN
  // statistics (per-replica BN: each micro-batch starts from the same running statistics), the
  // fold of every all-reduce. A power of two; cpu and sim devices (not cuda yet). An all-reduce
  // whose result feeds the batch's computation again (cross-replica BatchNorm) reduces over the
  // replicas of one micro-batch, so SyncBN with accumulation is not the same as more replicas; a
  // replicated output computed from it (the running statistics) is averaged over the micro-batches.
  int accumulate = 1;
  // With accumulate > 1: how many of a replica's micro-batches run at once, each on the threads
  // it would have one at a time (so the same bits) and with its own arena and fold leaves (the
  // memory plan grows by that much, lastPlannedBytes says so). 0: as many as the cores hold
  // beside the other replicas (runtime::ThreadShare::microAtOnce: cpu:1 x 4 on 2 cores, two) and
  // the host's available memory holds (runtime::availableHostBytes),
  // one at a time with a memoryBudget and across processes where the micro-batches all-reduce
  // (cross-replica BatchNorm: more is refused there); 1: one after another. With
  // SPMD_THREAD_INVARIANT=1 the micro-batches that run together share the device's threads (one
  // at a time: all of them).
  int microBatchesAtOnce = 0;
  // ZeRO-1 (compiler pass spmd-shard-update): each replica runs the optimizer's update on its 1/N
  // slice of every parameter and state tensor: the gradients' all-reduce becomes a reduce-scatter,
  // and an all-gather at the top of the next step rebuilds the parameters for the forward pass.
  // The parameters and optimizer state a step returns stay sliced across the replicas until read
  // (each replica holds 1/N of the optimizer state); reading one on the host (a checkpoint)
  // gathers it, under mpirun on every process at the same point. In exact reduction mode the
  // results are bitwise the replicated update's. With accumulate > 1 the slices are cut over the
  // devices (each device's micro-batches share one), and the gradients summed over the
  // micro-batches are reduce-scattered once a step. Not with allReplicas.
  bool shardUpdate = false;
  // FSDP (fully sharded data parallelism; also compiler pass spmd-gather-at-use): everything
  // shardUpdate does (it implies it), and each parameter's slices are gathered right before each
  // op that reads the parameter, in the forward pass and again in the backward pass, and freed
  // after it, instead of once for the whole step. Between steps and layers each replica holds 1/N
  // of the parameters and optimizer state; during a step, the full parameters of the op that
  // runs, its layer's full gradient until it is reduce-scattered, and the activations. In exact
  // reduction mode the results are bitwise the replicated step's, with accumulate > 1 too (each
  // micro-batch gathers the parameters again, as PyTorch's FSDP does). Not with allReplicas; a step
  // that clips by the global norm keeps its gradients whole until the update (as shardUpdate does).
  bool fullyShard = false;
  // With fullyShard: each layer's parameters are gathered one layer ahead (PyTorch FSDP's
  // forward/backward prefetch), so that across processes the gather runs on the communication
  // thread behind the previous layer's work; the memory plan holds one more layer's gathered
  // parameters. In one process the gathers are synchronous and this only moves them. Same bits.
  bool prefetchGathers = false;
  // Bytes one replica may hold during a step (its planned arena, inputs and other buffers). Over
  // it, the compiler recomputes layers in the backward pass (the fewest nn layers, e.g. residual
  // blocks, whose recomputation makes the plan fit; as spmd::checkpoint would, with the same
  // bits), or compiling fails naming the largest values live at the plan's fullest step. The
  // choice is in the IR dump (memory-budget.txt). 0: no budget.
  int64_t memoryBudget = 0;
  // A Chrome trace of every run from now on (every replica's steps, the collectives, compiles,
  // data waits): the file is written at exit, or by spmd::writeTrace(); also SPMD_TRACE=<file>.
  // Under mpirun each process writes <stem>.<process>.json. Graphs are off while tracing.
  std::string trace = {};
};

// Writes the Chrome trace that PmapOptions::trace or SPMD_TRACE started, now (it is written at
// exit too), and returns its path; "" when no trace is being recorded.
std::string writeTrace();

// How bf16 convolutions and matmuls run on `devices` ("cpu:4"; empty: $SPMD_DEVICES, else cpu:1)
// as pmap and jit compile them, in words: the backend's bf16 kernels (oneDNN on AVX512-BF16 or
// AMX, cuDNN and cuBLAS) or its f32 kernels between bf16 roundings (SPMD_NATIVE_BF16).
std::string bf16KernelPath(const std::string& devices = {});

namespace detail {

template <typename T> struct IsTuple : std::false_type {};
template <typename... T> struct IsTuple<std::tuple<T...>> : std::true_type {};
template <typename A, typename B> struct IsTuple<std::pair<A, B>> : std::true_type {};

struct PmapTraced {
  bool tuple = false;                   // the result is a tuple (its leaves' paths start "k.")
  std::vector<Tensor> outputs;          // traced leaves
  std::vector<size_t> elementLeaves;    // leaves per top-level output (out_axes entry)
  std::vector<std::string> names;       // per leaf
  std::shared_ptr<void> prototype;
};
using PmapTraceFn = std::function<PmapTraced(const std::vector<Tensor>& arguments)>;

// The traced result's leaves, their paths ("0.fc.weight") and the leaves of each top-level
// output (a tuple's elements; else the whole result), which out_axes entries apply to.
template <typename Out>
void describeOutputs(const Out& out, PmapTraced& traced) {
  Flat flat;
  auto one = [&](const auto& element, const std::string& path) {
    size_t before = flat.leaves.size();
    flatten(element, flat, path);
    traced.elementLeaves.push_back(flat.leaves.size() - before);
  };
  if constexpr (IsTuple<Out>::value) {
    size_t i = 0;
    traced.tuple = true;
    std::apply([&](const auto&... e) { (one(e, std::to_string(i++)), ...); }, out);
  } else {
    one(out, "");
  }
  traced.outputs = std::move(flat.leaves);
  traced.names = std::move(flat.paths);
}

class PmapCore : public CompileLog {
 public:
  // `jit`: spmd::jit's core (one device, no axis, everything replicated).
  // `defined`: the user's line that made the function (spmd::pmap / spmd::jit), which errors
  // about its results as a whole name (the traced return's location).
  PmapCore(PmapOptions options, bool jit, Loc defined);
  ~PmapCore();
  std::pair<std::vector<Tensor>, std::shared_ptr<void>> call(
      const std::vector<Tensor>& leaves, const std::vector<size_t>& argumentLeaves,
      const std::vector<std::string>& leafNames, const std::string& structure,
      const PmapTraceFn& trace);
  int deviceCount() const;
  int globalDeviceCount() const;
  runtime::CallCounts lastCall() const;
  size_t lastPlannedBytes() const;
  int threadsPerReplica(std::string* why) const;
  // With accumulation, the micro-batches each replica runs at once (PmapOptions::microBatchesAtOnce);
  // given the compiled split, also within the host's memory, and one at a time where its micro
  // part all-reduces across processes (more asked for there: an error).
  int microBatchesAtOnce(const runtime::AccumulationSplit* split = nullptr) const;

 private:
  struct Entry;
  struct State;
  // How errors name the function: "spmd::pmap 'name': " or "jit 'name': ".
  std::string who() const;
  void noteReductionsWithinMicroBatches(const runtime::AccumulationSplit& split, int A) const;
  // What every process must share before the first step of a compiled function (Agreement.h).
  std::vector<std::pair<std::string, std::string>> fingerprint(
      const std::string& structure, const std::vector<std::string>& names,
      const std::vector<Tensor>& leaves, const std::vector<Axis>& axes, const runtime::ReplicaGroup& group) const;
  // Runs the compiled step on the leaves (runtime::callReplicated, or callAccumulated with
  // accumulation) and returns its outputs as device-resident tensors; donated inputs give their
  // buffers to outputs.
  std::vector<Tensor> run(Entry& entry, const std::vector<Tensor>& leaves, const std::vector<size_t>& argumentLeaves);
  std::unique_ptr<State> state_;
};

// The arguments' leaves ("argument 0.fc.weight", ...) and how many each argument has.
template <typename... Args>
std::pair<Flat, std::vector<size_t>> flattenArguments(const Args&... args) {
  Flat flat;
  std::vector<size_t> argumentLeaves;
  size_t index = 0;
  auto add = [&](const auto& arg) {
    size_t before = flat.leaves.size();
    flatten(arg, flat, "argument " + std::to_string(index++));
    argumentLeaves.push_back(flat.leaves.size() - before);
  };
  (add(args), ...);
  return {std::move(flat), std::move(argumentLeaves)};
}

// Flattens the arguments, calls the core (tracing and compiling on a new signature) and
// rebuilds the function's result from the output leaves: the body of every pmapped or jitted
// call.
template <typename Core, typename F, typename... Args>
auto callCompiled(Core& core, F& f, const Args&... args) {
  using Out = Result_t<F, Args...>;
  auto [flat, argumentLeaves] = flattenArguments(args...);
  auto trace = [&](const std::vector<Tensor>& traced) {
    auto out = callTraced(f, traced, args...);
    PmapTraced result;
    describeOutputs(*out, result);
    result.prototype = out;
    return result;
  };
  auto [outputs, prototype] = core.call(flat.leaves, argumentLeaves, flat.paths, flat.structure, trace);
  return rebuild<Out>(prototype, outputs);
}

// The axis of each leaf of one argument or output (`keys`: the leaves' paths within it, "" for a
// Tensor): `axis` itself, or with spmd::perLeaf each named leaf's own; a name that is no leaf is
// an error naming `what`.
std::vector<Axis> leafAxes(const Axis& axis, const std::vector<std::string>& keys, const std::string& what);

// A pmapped function called while another function is traced (jax's pmap inside a traced
// function): the enclosing spmd::shardMap's mesh must have the axis it maps over; each replica
// takes its slice of the arguments stacked over a dimension (in_axes, per leaf with
// spmd::perLeaf; spmd::replicated ones whole), the function's ops join the enclosing trace, and
// results come back stacked over the axis at a dimension (out_axes: an all_gather) or,
// spmd::replicated, checked invariant over it. Errors name the pmap's line and what to change
// (frontend/NestedPmap.cpp).
std::vector<Tensor> nestedArguments(const PmapOptions& options, Loc defined, const Flat& flat,
                                    const std::vector<size_t>& argumentLeaves);
std::vector<Tensor> nestedResults(const PmapOptions& options, Loc defined, const PmapTraced& traced);
// Whether a function is being traced on this thread.
bool tracing();

template <typename F, typename... Args>
auto callNested(const PmapOptions& options, Loc defined, F& f, const Args&... args) {
  using Out = Result_t<F, Args...>;
  auto [flat, argumentLeaves] = flattenArguments(args...);
  auto out = callTraced(f, nestedArguments(options, defined, flat, argumentLeaves), args...);
  PmapTraced traced;
  describeOutputs(*out, traced);
  return rebuild<Out>(out, nestedResults(options, defined, traced));
}

}  // namespace detail

template <typename F>
class Pmapped : public detail::CompiledFunction<detail::PmapCore> {
 public:
  Pmapped(F f, PmapOptions options, Loc defined)
      : CompiledFunction(std::make_shared<detail::PmapCore>(options, false, defined)), f_(std::move(f)),
        options_(std::move(options)), defined_(defined) {}

  // Called while another function is traced, the function joins that trace (detail::callNested);
  // else it runs, compiled for these arguments' signature.
  template <typename... Args>
  auto operator()(const Args&... args) {
    if (detail::tracing()) return detail::callNested(options_, defined_, f_, args...);
    return detail::callCompiled(*core_, f_, args...);
  }

  // This process's devices (the leading axis of stacked inputs, the parts of a split batch).
  int deviceCount() const { return core_->deviceCount(); }
  // Devices of every process of the job: the size of the mapped axis.
  int globalDeviceCount() const { return core_->globalDeviceCount(); }
  // Host threads each replica runs its kernels with (PmapOptions::threadsPerReplica; 0 where the
  // backend's results do not depend on them); `why` says how the number was reached.
  int threadsPerReplica(std::string* why = nullptr) const { return core_->threadsPerReplica(why); }

 private:
  F f_;
  PmapOptions options_;
  Loc defined_;
};

// Bad options (device list, axes) are reported here, before the first call.
template <typename F>
Pmapped<F> pmap(F f, PmapOptions options = {}, Loc loc = Loc::current()) {
  return Pmapped<F>(std::move(f), std::move(options), loc);
}

}  // namespace spmd
