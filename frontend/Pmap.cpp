// PmapCore: per-leaf mapping and checks, tracing one replica, compiling, distributing inputs
// as views (no copy on the CPU backend) and assembling outputs with one copy each.
#include "frontend/Pmap.h"

#include "runtime/base/Timeline.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "compiler/PlanMemory.h"
#include "compiler/SplitAccumulation.h"
#include "frontend/Agreement.h"
#include "frontend/Mesh.h"
#include "frontend/Trace.h"
#include "runtime/exec/DeviceArray.h"
#include "runtime/exec/MeshParts.h"
#include "runtime/base/HostMemory.h"
#include "runtime/base/Parse.h"
#include "runtime/base/Timeout.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Variants.h"
#include "runtime/mpi/Processes.h"
#include "runtime/exec/ReplicaGroup.h"
#include "runtime/program/FusedBody.h"
#include "runtime/program/MemoryPlan.h"
#include "runtime/exec/AccumulatedCall.h"

namespace spmd::detail {

struct PmapCore::Entry {
  std::unique_ptr<runtime::ReplicaGroup> group;  // the whole step; with accumulation its apply part
  // Accumulation's per-micro-batch part: one group per micro-batch that runs at once.
  std::vector<std::unique_ptr<runtime::ReplicaGroup>> micro;
  AccumulationSplit split;
  runtime::FoldBuffers fold;  // accumulation's, kept between calls
  std::shared_ptr<void> prototype;
  std::vector<Axis> outputAxes;                    // per output leaf
  std::vector<std::string> outputNames;            // per output leaf ("0.fc.weight")
  // The compiled step's output placements (with accumulation, the whole step's, before the split).
  std::vector<runtime::Placement> outputPlacements;
  int64_t calls = 0;
};

struct PmapCore::State {
  PmapOptions options;
  bool jit = false;  // spmd::jit: one device, no axis, every argument and output replicated
  runtime::DeviceList devices;
  // The processes the axis spans, taken once: this launch's (mpirun's, or this process alone)
  // for pmap; this process alone for jit.
  const runtime::Job* job = nullptr;
  Loc defined = Loc::current();  // the user's spmd::pmap / spmd::jit line
  std::chrono::milliseconds timeout{0};
  std::map<std::string, std::unique_ptr<Entry>> cache;
  runtime::CallCounts lastCall;  // of the last call's step program (PmapCore::lastCall)
  size_t plannedBytes = 0;        // of the last compiled one (PmapCore::lastPlannedBytes)
  // The threads the last compiled step runs with, and how they were reached (threadsPerReplica).
  std::optional<runtime::ThreadShare> threads;
  // Calls from several threads queue (tracing, the cache, the replica group's arenas).
  std::mutex mutex;
};

namespace {

std::string prefix(const PmapOptions& options) { return "spmd::pmap '" + options.name + "': "; }
std::string jitPrefix(const PmapOptions& options) { return "jit '" + options.name + "': "; }

// Which leaves belong to the donated arguments (PmapOptions::donateArguments).
std::vector<bool> donatedLeaves(const PmapOptions& options, const std::vector<size_t>& argumentLeaves, size_t count) {
  std::vector<bool> donated(count);
  for (int a : options.donateArguments) {
    size_t first = 0;
    for (int k = 0; k < a; ++k) first += argumentLeaves[k];
    for (size_t i = first; i < first + argumentLeaves[a]; ++i) donated[i] = true;
  }
  return donated;
}

std::string tagOf(const Axis& axis) {
  switch (axis.kind) {
    case Axis::Kind::Replicated: return "replicated:";
    case Axis::Kind::Stacked: return "stacked:";
    case Axis::Kind::Split: return "split:";
    case Axis::Kind::Mesh: return "mesh " + axis.mesh->mesh.describe() + " " + runtime::specString(axis.mesh->spec) + ":";
  }
  return "";
}

// One replica's shape of a leaf, checking the leading axis against the device count.
Shape localShape(const Tensor& leaf, Axis axis, int devices, const std::string& name,
                 const PmapOptions& options) {
  const Shape& shape = leaf.shape();
  if (axis.kind == Axis::Kind::Replicated) return shape;
  if (axis.kind == Axis::Kind::Mesh)
    return runtime::meshPartShape(shape, leaf.dtype(), axis.mesh->mesh, axis.mesh->spec, prefix(options) + name);
  if (shape.empty())
    throw Error(prefix(options) + name + " (" + leaf.typeString() + ") is a scalar, so it cannot be "
                "mapped over devices; mark it spmd::replicated in inAxes");
  if (axis.kind == Axis::Kind::Stacked) {
    if (shape[0] != devices)
      throw Error(prefix(options) + name + " (" + leaf.typeString() + ") is mapped over its "
                  "leading axis (inAxes 0), which must equal the device count " +
                  std::to_string(devices) + ", but it is " + std::to_string(shape[0]) +
                  "; stack it as [" + std::to_string(devices) + ", local_batch, ...], or pass a "
                  "global batch with spmd::split");
    return Shape(shape.begin() + 1, shape.end());
  }
  int64_t global = shape[0];
  if (global % devices != 0) {
    int64_t below = global / devices * devices, above = below + devices;
    throw Error(prefix(options) + name + " (" + leaf.typeString() + ") is a global batch of " +
                std::to_string(global) + " split over " + std::to_string(devices) +
                " devices (spmd::split), but " + std::to_string(global) + " is not divisible by " +
                std::to_string(devices) + "; use a multiple of " + std::to_string(devices) +
                (below > 0 ? ", such as " + std::to_string(below) + " or " + std::to_string(above)
                           : ", such as " + std::to_string(above)));
  }
  Shape local = shape;
  local[0] = global / devices;
  return local;
}

constexpr int kMaxMappedRank = 8;

// `dim` (negative: from the last) of a tensor of `rank`, checked; `what` names the tensor.
int mappedDim(int dim, int rank, const std::string& what, const char* option, const PmapOptions& options) {
  const int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    throw Error(prefix(options) + what + " is mapped over its dimension " + std::to_string(dim) + " (" + option +
                "), but it has " + std::to_string(rank) + " dimension(s); give one of 0.." + std::to_string(rank - 1) +
                " or -" + std::to_string(rank) + "..-1");
  return d;
}

// `a` with its dimension `from` moved to position `to` (the others in order): a copy.
Array moveAxis(const Array& a, int from, int to) {
  const size_t rank = a.shape.size(), e = dtypeSize(a.dtype);
  std::vector<size_t> order;  // order[k]: the source dimension of result dimension k
  for (size_t d = 0; d < rank; ++d)
    if (int(d) != from) order.push_back(d);
  order.insert(order.begin() + to, size_t(from));
  Shape shape(rank);
  for (size_t k = 0; k < rank; ++k) shape[k] = a.shape[order[k]];
  Array out = Array::zeros(a.dtype, shape);
  const Shape strides = rowMajorStrides(a.shape);
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t at = 0;
    for (size_t k = 0; k < rank; ++k) at += index[k] * strides[order[k]];
    std::memcpy(out.data() + size_t(i) * e, a.data() + size_t(at) * e, e);
    for (int64_t k = int64_t(rank) - 1; k >= 0; --k) {
      if (++index[size_t(k)] < shape[size_t(k)]) break;
      index[size_t(k)] = 0;
    }
  }
  return out;
}

// The runtime's view of the leaves (runtime/exec/ReplicatedCall.h).
std::vector<runtime::CallArgument> callArguments(const std::vector<Tensor>& leaves, const std::vector<bool>& donated) {
  std::vector<runtime::CallArgument> arguments;
  for (size_t i = 0; i < leaves.size(); ++i)
    arguments.push_back({leaves[i].resident(), leaves[i].resident() ? nullptr : &leaves[i].array(), donated[i]});
  return arguments;
}

}  // namespace

// The axis of each leaf of one argument or output (`keys`: the leaves' paths within it, "" for a
// Tensor): `axis` itself, or with spmd::perLeaf each named leaf's own; a name that is no leaf is
// an error naming `what`.
std::vector<Axis> leafAxes(const Axis& axis, const std::vector<std::string>& keys, const std::string& what) {
  Axis rest = axis;
  rest.leaves = nullptr;
  if (!axis.leaves) return std::vector<Axis>(keys.size(), rest);
  if (keys.size() == 1 && keys[0].empty())
    throw Error(what + " is a tensor, but its axis names leaves (spmd::perLeaf); give it one Axis");
  for (const auto& [name, a] : *axis.leaves)
    if (std::find(keys.begin(), keys.end(), name) == keys.end()) {
      std::string known;
      for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
      throw Error(what + " names leaf '" + name + "' (spmd::perLeaf), which the tree does not have; its leaves: " +
                  known);
    }
  std::vector<Axis> out;
  for (const std::string& key : keys) {
    auto it = axis.leaves->find(key);
    out.push_back(it == axis.leaves->end() ? rest : it->second);
  }
  return out;
}

// How the backend runs bf16 convolutions and matmuls for this compilation: its bf16 kernels where
// it has them, unless SPMD_NATIVE_BF16=0 (f32 between roundings: the same bits on every ISA);
// SPMD_NATIVE_BF16=1 requires them. `path` says which, in words (the drift fingerprint compares it).
// `refusal`: the error for a program with bf16 ops when SPMD_NATIVE_BF16=1 and the backend has none.
struct Bf16Choice {
  bool native = false;
  std::string path, refusal;
};

Bf16Choice bf16Choice(const runtime::Driver& driver) {
  const std::optional<bool> wanted = runtime::envSwitch("SPMD_NATIVE_BF16");
  const runtime::Bf16Kernels kernels = driver.bf16Kernels();
  if (kernels.native && wanted.value_or(true)) return {true, kernels.path, ""};
  Bf16Choice emulated{false, kernels.native ? "emulated: the f32 kernels between bf16 roundings (SPMD_NATIVE_BF16=0)"
                                            : kernels.path, ""};
  if (wanted.value_or(false))
    emulated.refusal = "SPMD_NATIVE_BF16=1 asks for the " + driver.name() + " backend's bf16 kernels, but it runs " +
                       kernels.path + "; unset it (bf16 convolutions and matmuls then run in f32 between roundings)";
  return emulated;
}

PmapCore::PmapCore(PmapOptions options, bool jit, Loc defined) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->defined = defined;
  state_->jit = jit;
  const PmapOptions& o = state_->options;
  if (!o.trace.empty()) runtime::timeline::start(o.trace);
  if (o.axisName.empty())
    throw Error(prefix(o) + "axisName is empty; name the mapped axis (e.g. \"batch\")");
  for (const auto* axes : {&o.inAxes, &o.outAxes})
    for (Axis axis : *axes)
      if (axis.kind == Axis::Kind::Stacked && (axis.dim < -kMaxMappedRank || axis.dim >= kMaxMappedRank))
        throw Error(prefix(o) + "axis " + std::to_string(axis.dim) + " in " +
                    (axes == &o.inAxes ? "inAxes" : "outAxes") + " is not a dimension of any tensor; give a "
                    "dimension of the tensor (negative ones count from the last)");
  state_->devices = runtime::parseDeviceList(o.devices);
  state_->job = jit ? &runtime::Job::single() : &runtime::processJob();
  if (jit && state_->devices.size() != 1)
    throw Error(jitPrefix(o) + "device list '" + state_->devices.spec + "' has " +
                std::to_string(state_->devices.size()) + " devices but jit runs on one; use spmd::pmap to run " +
                "one replica per device, or name one device (e.g. " + state_->devices.backend + ":1)");
  if (!(o.collectiveTimeoutSeconds >= 0 && o.collectiveTimeoutSeconds <= 1e7))  // NaN too
    throw Error(prefix(o) + "collectiveTimeoutSeconds is " + std::to_string(o.collectiveTimeoutSeconds) +
                "; give the seconds a collective may wait for the other replicas (up to 1e7), or 0 for "
                "$SPMD_COLLECTIVE_TIMEOUT, else 300");
  if (o.driftCheckEvery < 0)
    throw Error(prefix(o) + "driftCheckEvery is " + std::to_string(o.driftCheckEvery) +
                "; give a number of steps between checks, or 0 for none");
  state_->timeout = runtime::collectiveTimeoutFromEnvironment(o.collectiveTimeoutSeconds);
  if (o.accumulate < 1 || (o.accumulate & (o.accumulate - 1)) != 0 || o.accumulate > 4096)
    throw Error(prefix(o) + "accumulate is " + std::to_string(o.accumulate) +
                "; give a power of two from 1 to 4096 (1: no accumulation), so that each replica's micro-batches "
                "form one subtree of the all-reduce's fold tree");
  if (o.accumulate > 1 && jit) throw Error(jitPrefix(o) + "accumulate applies to pmap only");
  if (o.microBatchesAtOnce < 0 || o.microBatchesAtOnce > o.accumulate)
    throw Error(prefix(o) + "microBatchesAtOnce is " + std::to_string(o.microBatchesAtOnce) + " with accumulate " +
                std::to_string(o.accumulate) + "; give 0 (as many as the cores hold) or 1 to accumulate (" +
                std::to_string(o.accumulate) + ")");
  const std::string sharding = o.fullyShard ? "fullyShard (FSDP)" : "shardUpdate (ZeRO-1)";
  if ((o.shardUpdate || o.fullyShard) && o.allReplicas)
    throw Error(prefix(o) + sharding + " with allReplicas is not supported: the sliced parameters and "
                "optimizer state are not held per replica; turn one of them off");
  if (o.shardedBucketBytes < 1)
    throw Error(prefix(o) + "shardedBucketBytes is " + std::to_string(o.shardedBucketBytes) +
                "; give the largest combined reduce-scatter or all-gather in bytes (1: one per tensor)");
  if (o.prefetchGathers && !o.fullyShard)
    throw Error(prefix(o) + "prefetchGathers applies to fullyShard (FSDP), which is off; turn it on, or drop "
                "prefetchGathers");
  if (o.memoryBudget < 0)
    throw Error(prefix(o) + "memoryBudget is " + std::to_string(o.memoryBudget) +
                "; give the bytes one replica may hold during a step, or 0 for no budget");
  if (o.threadsPerReplica < 0 || o.threadsPerReplica > 4096)  // SPMD_THREADS_PER_REPLICA's range
    throw Error(prefix(o) + "threadsPerReplica is " + std::to_string(o.threadsPerReplica) +
                "; give a thread count from 1 to 4096, or 0 for the default share of the cores");
}

PmapCore::~PmapCore() = default;

// Says once per compile (on stderr) where all-reduces reduce within each micro-batch, so that
// the accumulated step is not the one of devices x A replicas (cross-replica BatchNorm's
// statistics over one micro-batch's replicas).
void PmapCore::noteReductionsWithinMicroBatches(const runtime::AccumulationSplit& split, int A) const {
  const std::vector<std::string>& where = split.withinMicroBatch;
  if (where.empty() || state_->job->info().rank != 0) return;  // process 0 says it for all
  const std::string devices = std::to_string(split.micro.replicas), all = std::to_string(split.micro.replicas * A);
  const bool one = where.size() == 1;
  std::string places;
  for (size_t i = 0; i < where.size() && i < 3; ++i) places += (i ? "; " : "") + where[i];
  if (where.size() > 3) places += "; and " + std::to_string(where.size() - 3) + " more";
  const std::string note = "spmd: note: " + who() + "with accumulate = " + std::to_string(A) + ", " +
                           std::to_string(where.size()) + (one ? " all-reduce reduces" : " all-reduces reduce") +
                           " over each micro-batch's " + devices + " replicas, not all " + all + ", because " +
                           (one ? "its result feeds" : "their results feed") +
                           " work that varies with the batch (cross-replica BatchNorm's statistics, say): " + places +
                           ". So the step is not the one " + all + " devices run; reducing per replica there "
                           "(per-replica BatchNorm), or accumulate = 1, makes it that step\n";
  std::fputs(note.c_str(), stderr);
}

std::string PmapCore::who() const {
  return state_->jit ? jitPrefix(state_->options) : prefix(state_->options);
}
int PmapCore::deviceCount() const { return state_->devices.size(); }
runtime::CallCounts PmapCore::lastCall() const {
  std::lock_guard lock(state_->mutex);
  return state_->lastCall;
}
size_t PmapCore::lastPlannedBytes() const {
  std::lock_guard lock(state_->mutex);
  return state_->plannedBytes;
}
int PmapCore::threadsPerReplica(std::string* why) const {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->threads) {  // compiled: what the last compiled step runs
      if (why) *why = state_->threads->why;
      return state_->threads->threads;
    }
  }
  // Before the first call: the share the step will run unless its micro-batches must run fewer at
  // once than the cores hold (the host's memory, cross-replica BatchNorm across processes).
  runtime::ThreadShare share =
      state_->devices.driver().threadsPerReplica(state_->devices, state_->options.threadsPerReplica,
                                                 state_->job->info(), state_->options.accumulate, microBatchesAtOnce());
  if (why) *why = share.why;
  return share.threads;
}

int PmapCore::microBatchesAtOnce(const runtime::AccumulationSplit* split) const {
  const PmapOptions& o = state_->options;
  if (o.accumulate <= 1) return 1;
  const bool acrossProcesses = state_->job->info().size > 1;
  // Across processes a micro part that moves data between replicas (cross-replica BatchNorm)
  // must reach MPI in one order in every process: its micro-batches run one at a time.
  if (split && acrossProcesses && split->micro.exchanges()) {
    if (o.microBatchesAtOnce > 1)
      throw Error(who() + "microBatchesAtOnce is " + std::to_string(o.microBatchesAtOnce) +
                  ", but the micro-batches' part all-reduces across processes (cross-replica BatchNorm), and "
                  "every process must reach those collectives in one order: they run one at a time; set "
                  "microBatchesAtOnce to 0 or 1, or use per-replica BatchNorm");
    return 1;
  }
  // A device of its own memory (sim, a GPU) runs its micro-batches on its one stream, one after
  // another: running several at once gains nothing there, and they would share its stream.
  if (!state_->devices.driver().makeDevice(state_->devices, 0)->hostAccessible()) {
    if (o.microBatchesAtOnce > 1)
      throw Error(who() + "microBatchesAtOnce is " + std::to_string(o.microBatchesAtOnce) + ", but " +
                  state_->devices.spec + "'s devices run their micro-batches on one stream, one at a time; set "
                  "microBatchesAtOnce to 0 or 1 (several at once share a cpu device's cores)");
    return 1;
  }
  if (o.microBatchesAtOnce > 0) return o.microBatchesAtOnce;
  if (o.memoryBudget > 0) return 1;
  int atOnce = std::max(1, state_->devices.driver()
                               .threadsPerReplica(state_->devices, o.threadsPerReplica, state_->job->info(), o.accumulate)
                               .microAtOnce);
  // As many as the host's memory holds too (each a micro part's arena, a leaf and copies).
  if (split && atOnce > 1) {
    const size_t room = runtime::availableHostBytes();
    while (atOnce > 1 && runtime::residentBytes(*split, o.accumulate, false, atOnce) * size_t(state_->devices.size()) > room)
      --atOnce;
  }
  return atOnce;
}

int PmapCore::globalDeviceCount() const {
  return state_->devices.size() * state_->job->info().size;
}

std::pair<std::vector<Tensor>, std::shared_ptr<void>> PmapCore::call(
    const std::vector<Tensor>& given, const std::vector<size_t>& argumentLeaves,
    const std::vector<std::string>& names, const std::string& structure,
    const PmapTraceFn& traceFn) {
  const PmapOptions& o = state_->options;
  const int devices = deviceCount();
  if (!o.inAxes.empty() && o.inAxes.size() != argumentLeaves.size())
    throw Error(who() + "inAxes has " + std::to_string(o.inAxes.size()) +
                " entries but the function is called with " +
                std::to_string(argumentLeaves.size()) +
                " arguments; give one per argument (spmd::replicated, 0 or spmd::split)");
  for (int a : o.donateArguments)
    if (a < 0 || a >= static_cast<int>(argumentLeaves.size()))
      throw Error(who() + "donateArguments names argument " + std::to_string(a) +
                  " but the function is called with " + std::to_string(argumentLeaves.size()) + " arguments");
  std::vector<Axis> axes;
  for (size_t a = 0, first = 0; a < argumentLeaves.size(); first += argumentLeaves[a++]) {
    const Axis axis = state_->jit ? replicated : o.inAxes.empty() ? Axis(0) : o.inAxes[a];
    if (!axis.leaves) {  // the common case: every leaf alike
      axes.insert(axes.end(), argumentLeaves[a], axis);
      continue;
    }
    const std::string prefix = "argument " + std::to_string(a);
    std::vector<std::string> keys;
    for (size_t i = first; i < first + argumentLeaves[a]; ++i)
      keys.push_back(names[i].size() > prefix.size() ? names[i].substr(prefix.size() + 1) : "");
    for (Axis& leaf : leafAxes(axis, keys, who() + prefix + " (inAxes)")) axes.push_back(std::move(leaf));
  }
  // A leaf stacked over another dimension (jax's in_axes = 1, -1) is moved to lead, on the host.
  std::vector<Tensor> leaves = given;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (axes[i].kind != Axis::Kind::Stacked || axes[i].dim == 0 || !leaves[i].defined() || leaves[i].isTraced())
      continue;
    const int d = mappedDim(axes[i].dim, int(leaves[i].rank()), names[i] + " (" + leaves[i].typeString() + ")",
                            "inAxes", o);
    if (leaves[i].dim(size_t(d)) != devices)
      throw Error(who() + names[i] + " (" + leaves[i].typeString() + ") is mapped over its dimension " +
                  std::to_string(axes[i].dim) + " (inAxes), which must equal the device count " +
                  std::to_string(devices) + ", but it is " + std::to_string(leaves[i].dim(size_t(d))));
    if (d != 0) leaves[i] = Tensor(moveAxis(leaves[i].array(), d, 0));
    axes[i].dim = 0;
  }
  // A donated device-resident tensor must be passed once: its buffers are overwritten by an
  // output, so a second use (donated or not) would read or write them after that (jax refuses
  // it too). Checked before anything runs, so the inputs stay intact.
  {
    const std::vector<bool> donatedLeaf = donatedLeaves(o, argumentLeaves, leaves.size());
    for (size_t i = 0; i < leaves.size(); ++i)
      for (size_t j = i + 1; j < leaves.size(); ++j)
        if ((donatedLeaf[i] || donatedLeaf[j]) && leaves[i].resident() && leaves[i].resident() == leaves[j].resident())
          throw Error(who() + names[i] + " and " + names[j] +
                      " are the same device-resident tensor, and " + (donatedLeaf[i] ? names[i] : names[j]) +
                      " is donated (donateArguments): its buffers would be overwritten while the other still "
                      "reads them; pass a copy, or donate neither");
  }

  std::vector<Shape> local;
  std::vector<std::string> tags;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].defined())
      throw Error(who() + names[i] + " is an undefined tensor");
    if (leaves[i].isTraced())
      throw Error(who() + names[i] + " is a traced tensor of a function traced earlier (it escaped that function, "
                  "kept in a variable the function captured) and has no value; return it from that function and pass "
                  "the result");
    local.push_back(localShape(leaves[i], axes[i], devices, names[i], o));
    tags.push_back(tagOf(axes[i]));
  }

  std::lock_guard lock(state_->mutex);
  std::string signature = signatureOf(leaves, structure, state_->jit ? std::vector<std::string>{} : tags);
  auto found = state_->cache.find(signature);
  if (found == state_->cache.end()) {
    beginCompile(signature, state_->jit ? "'" + o.name + "'" : "pmap '" + o.name + "' on " + state_->devices.spec,
                 names);
    auto entry = std::make_unique<Entry>();
    Trace trace(o.name);
    // The axis spans every process's devices (global replica = process * devices + local), and
    // with accumulation every replica's micro-batches (virtual replica = replica * A + step).
    const int A = o.accumulate;
    if (!state_->jit) trace.bindAxis(o.axisName, devices * state_->job->info().size * A, A);
    std::vector<Tensor> arguments;
    for (size_t i = 0; i < leaves.size(); ++i) {
      Shape traced = local[i];
      if (A > 1 && axes[i].kind != Axis::Kind::Replicated) {
        if (traced.empty() || traced[0] % A != 0)
          throw Error(who() + names[i] + " has " + (traced.empty() ? std::string("no batch dimension") :
                      std::to_string(traced[0]) + " rows per device") + ", which accumulate = " + std::to_string(A) +
                      " cannot split into equal micro-batches; use a batch of devices x accumulate x micro-batch rows");
        traced[0] /= A;
      }
      arguments.push_back(trace.addArgument(leaves[i].dtype(), traced));
    }
    const std::vector<bool> donatedLeaf = donatedLeaves(o, argumentLeaves, leaves.size());
    for (size_t i = 0; i < leaves.size(); ++i) {  // after all arguments exist (attribute arrays)
      if (axes[i].kind != Axis::Kind::Replicated) trace.markArgumentMapped(i);
      if (axes[i].kind == Axis::Kind::Mesh) trace.markArgumentOnMesh(i, axes[i].mesh->spec);
      if (donatedLeaf[i]) trace.markArgumentDonated(i);
    }
    PmapTraced traced;
    try {
      traced = traceFn(arguments);
    } catch (const Error& e) {
      // A shape error deep in the step often comes from mapped inputs of different batch sizes
      // (8 images, 6 labels): say so first, at the call, with their sizes.
      std::string sizes;
      std::set<int64_t> rows;
      for (size_t i = 0; i < leaves.size(); ++i)
        if (axes[i].kind != Axis::Kind::Replicated && !local[i].empty()) {
          rows.insert(local[i][0]);
          sizes += (sizes.empty() ? "" : ", ") + names[i] + " " + std::to_string(local[i][0]);
        }
      if (rows.size() < 2) throw;
      throw Error(who() + "the mapped inputs have different rows per replica (" + sizes +
                  "); give them the same batch size. Tracing the step then failed: " + e.what());
    }
    if (!o.outAxes.empty() && o.outAxes.size() != traced.elementLeaves.size())
      throw Error(who() + "outAxes has " + std::to_string(o.outAxes.size()) +
                  " entries but the function returns " + std::to_string(traced.elementLeaves.size()) +
                  " outputs; give one per output (spmd::replicated, 0 or spmd::split)");
    for (size_t e = 0, first = 0; e < traced.elementLeaves.size(); first += traced.elementLeaves[e++]) {
      const Axis axis = state_->jit || o.outAxes.empty() ? replicated : o.outAxes[e];
      std::vector<std::string> keys;
      for (size_t i = first; i < first + traced.elementLeaves[e]; ++i) {
        const std::string& name = i < traced.names.size() ? traced.names[i] : "";
        const std::string element = std::to_string(e);
        keys.push_back(!traced.tuple ? name : name.size() > element.size() ? name.substr(element.size() + 1) : "");
      }
      for (Axis& leaf : leafAxes(axis, keys, who() + "output " + std::to_string(e) + " (outAxes)"))
        entry->outputAxes.push_back(std::move(leaf));
    }
    trace.finish(traced.outputs, state_->defined);
    for (size_t i = 0; i < traced.outputs.size(); ++i) {
      trace.describeResult(i, entry->outputAxes[i].kind != Axis::Kind::Replicated,
                           i < traced.names.size() ? traced.names[i] : "");
      if (entry->outputAxes[i].kind == Axis::Kind::Mesh) trace.markResultOnMesh(i, entry->outputAxes[i].mesh->spec);
    }
    // The NaN/Inf debug mode runs op by op (no fusion), so it can name the op at fault.
    const bool debugging = o.debugNans || o.debugInfs || runtime::debugNansFromEnvironment() ||
                           runtime::debugInfsFromEnvironment();
    const Bf16Choice bf16 = bf16Choice(state_->devices.driver());
    runtime::Program program =
        compileTrace(trace,
                     {.dumpDir = o.dumpDir, .entry = "main", .strict = o.strict,
                      .shardUpdate = (o.shardUpdate || o.fullyShard) && !state_->jit,
                      .gatherAtUse = o.fullyShard && !state_->jit, .bucketBytes = o.bucketBytes,
                      .shardedBucketBytes = o.shardedBucketBytes,
                      .prefetchGathers = o.fullyShard && o.prefetchGathers,
                      .planMemory = o.planMemory && A == 1, .fuseElementwise = o.fuseElementwise && !debugging,
                      // the debug scan reports plain indices
                      .activationLayout = o.assignLayouts && !debugging ? state_->devices.driver().activationLayout() : "",
                      .bf16Kernels = bf16.native, .memoryBudget = o.memoryBudget},
                     o.name);
    // bf16 values: its buffers, or the roundings fused into its elementwise bodies (a bf16 value
    // that only lived between them leaves no bf16 buffer).
    const bool hasBf16 =
        std::any_of(program.buffers.begin(), program.buffers.end(), [](const auto& b) { return b.dtype == DType::bf16; }) ||
        std::any_of(program.steps.begin(), program.steps.end(), [](const runtime::Step& s) {
          if (s.op != "fused") return false;
          const auto instrs = runtime::FusedBody::parse(s.text("body")).instrs;
          return std::any_of(instrs.begin(), instrs.end(),
                             [](const runtime::FusedInstr& in) { return in.kind == runtime::FusedOpKind::round_bf16; });
        });
    if (hasBf16 && !bf16.refusal.empty()) throw Error(who() + bf16.refusal);
    if (hasBf16 && runtime::envSwitch("SPMD_LOG_COMPILES").value_or(false))
      std::fprintf(stderr, "spmd: %sbf16 convolutions and matmuls on %s: %s\n", who().c_str(),
                   state_->devices.spec.c_str(), bf16.path.c_str());
    entry->outputPlacements = program.outputPlacements;
    for (size_t i = 0; i < traced.outputs.size(); ++i)
      entry->outputNames.push_back(i < traced.names.size() && !traced.names[i].empty() ? traced.names[i]
                                                                                        : "output " + std::to_string(i));
    if (A > 1) {
      entry->split = splitForAccumulation(program, entry->outputNames);
      noteReductionsWithinMicroBatches(entry->split, A);
      if (o.planMemory) planMemory(entry->split.micro), planMemory(entry->split.apply);
      const int atOnce = microBatchesAtOnce(&entry->split);
      while (int(entry->micro.size()) < atOnce)
        entry->micro.push_back(std::make_unique<runtime::ReplicaGroup>(
            entry->split.micro, state_->devices, *state_->job, state_->timeout, o.threadsPerReplica, 1, A, atOnce));
      // The apply part runs alone. Where its kernels' bits do not depend on the threads (an
      // optimizer's fused update, the fold's all-reduce), or with thread-invariant kernels, it
      // takes the device's whole share; else the micro-batches' (the share of the replica count
      // it stands for, so its bits are that layout's).
      const bool applyShares = !state_->devices.driver().threadsChangeBits(entry->split.apply);
      entry->group = std::make_unique<runtime::ReplicaGroup>(entry->split.apply, state_->devices, *state_->job,
                                                             state_->timeout, o.threadsPerReplica, A,
                                                             applyShares ? 1 : A, 1);
      state_->plannedBytes = runtime::residentBytes(entry->split, A, false, atOnce);
      runtime::ThreadShare share = entry->micro.front()->threadShare();
      const runtime::ThreadShare& applied = entry->group->threadShare();
      if (share.threads != 0 && applied.threads != share.threads)
        share.why += "; the update after the micro-batches runs on " + std::to_string(applied.threads) +
                     " (its kernels' bits do not depend on the threads)";
      state_->threads = share;
    } else {
      state_->plannedBytes = runtime::residentBytes(program, false);
      entry->group = std::make_unique<runtime::ReplicaGroup>(program, state_->devices, *state_->job, state_->timeout,
                                                             o.threadsPerReplica);
      state_->threads = entry->group->threadShare();
    }
    entry->group->enableDebugNonFinite(o.debugNans, o.debugInfs);
    for (auto& group : entry->micro) group->enableDebugNonFinite(o.debugNans, o.debugInfs);
    entry->prototype = traced.prototype;
    if (state_->job->info().size > 1) {
      auto facts = fingerprint(structure, names, leaves, axes, *entry->group);
      if (hasBf16)  // processes on hosts of different ISAs could run different bf16 kernels
        facts.emplace_back("bf16 convolutions and matmuls (SPMD_NATIVE_BF16)", bf16.native ? bf16.path : "emulated");
      checkProcessesAgree(facts, who() + "before the first step");
    }
    found = state_->cache.emplace(signature, std::move(entry)).first;
  }
  called(signature);
  Entry& entry = *found->second;

  std::vector<Tensor> results = run(entry, leaves, argumentLeaves);
  firstStepDone();
  // An output stacked over another dimension (jax's out_axes = 1, -1): the replicas' axis moved
  // there, on the host.
  for (size_t k = 0; k < results.size(); ++k)
    if (entry.outputAxes[k].kind == Axis::Kind::Stacked && entry.outputAxes[k].dim != 0) {
      const int d = mappedDim(entry.outputAxes[k].dim, int(results[k].rank()),
                              "output " + entry.outputNames[k] + " (" + results[k].typeString() + ")", "outAxes", o);
      if (d != 0) results[k] = Tensor(moveAxis(results[k].array(), 0, d));
    }
  if (o.driftCheckEvery > 0 && ++entry.calls % o.driftCheckEvery == 0) {
    std::vector<std::pair<std::string, Tensor>> replicatedOutputs;
    for (size_t k = 0; k < results.size(); ++k)
      if (entry.outputAxes[k].kind == Axis::Kind::Replicated && !o.allReplicas &&
          entry.outputPlacements[k].kind != runtime::Placement::Kind::Sliced)
        replicatedOutputs.emplace_back(entry.outputNames[k], results[k]);
    checkReplicasAgree(replicatedOutputs, who() + "drift check after call " + std::to_string(entry.calls));
  }
  return {std::move(results), entry.prototype};
}

std::vector<std::pair<std::string, std::string>> PmapCore::fingerprint(const std::string& structure,
                            const std::vector<std::string>& names, const std::vector<Tensor>& leaves,
                            const std::vector<Axis>& axes, const runtime::ReplicaGroup& group) const {
  Facts facts;
  // Static arguments, as Flatten.h writes them: "static <path> = <value>;".
  for (size_t at = structure.find("static "); at != std::string::npos; at = structure.find("static ", at + 1)) {
    size_t equals = structure.find(" = ", at), end = structure.find(';', at);
    if (equals == std::string::npos || end == std::string::npos || equals > end) continue;
    facts.emplace_back(structure.substr(at, equals - at), structure.substr(equals + 3, end - equals - 3));
  }
  for (size_t i = 0; i < leaves.size(); ++i)
    facts.emplace_back("argument " + names[i], tagOf(axes[i]) + leaves[i].typeString());
  char hex[20];  // of the traced IR, constants a closure captured included
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(lastTracedIr())));
  facts.emplace_back("traced step (IR hash; a value the function captured, such as a flag, differs)", hex);
  facts.emplace_back("threads per replica",
                     std::to_string(state_->threads ? state_->threads->threads : group.threadsPerReplica()));
  facts.emplace_back("accumulation steps", std::to_string(state_->options.accumulate));
  // Both change which collectives a step runs (gathers, reduce-scatters, recomputed all-reduces).
  facts.emplace_back("parameter sharding (shardUpdate, fullyShard)",
                     state_->options.fullyShard ? "FSDP" : state_->options.shardUpdate ? "ZeRO-1" : "none");
  facts.emplace_back("memory budget (memoryBudget, bytes per replica)", std::to_string(state_->options.memoryBudget));
  // Both change the collectives a step runs, or their order.
  facts.emplace_back("sharded collectives' bucket (shardedBucketBytes) and prefetch (prefetchGathers)",
                     std::to_string(state_->options.shardedBucketBytes) + (state_->options.prefetchGathers ? ", prefetch" : ""));
  facts.emplace_back("reduction mode (SPMD_REDUCE)", runtime::reduceModeName(runtime::reduceModeFromEnvironment()));
  // How kernels are chosen: every process must take part in process 0's choices
  // (runtime/device/KernelChoice.h), or wait for one that never comes, and run the same pins.
  facts.emplace_back("cuDNN algorithms timed (SPMD_CUDNN_SEARCH)",
                     runtime::cudnnSearch() ? "yes" : "no");
  facts.emplace_back("cuDNN graph engines offered (SPMD_CUDNN_GRAPH)", runtime::cudnnGraphEngines() ? "yes" : "no");
  // Which layout the compiler gives activations on cuda and sim, so which cuDNN kernels run.
  facts.emplace_back("channels-last activations on cuda and sim (SPMD_CHANNELS_LAST)",
                     runtime::cudaChannelsLast() ? "yes" : "no");
  facts.emplace_back("CPU kernels timed (SPMD_KERNEL_TIMING)", runtime::kernelTiming() ? "yes" : "no");
  facts.emplace_back("thread-invariant kernels only (SPMD_THREAD_INVARIANT)",
                     runtime::threadInvariantKernels() ? "yes" : "no");
  facts.emplace_back("tight-rounding kernels only (SPMD_TIGHT_ROUNDING)", runtime::tightRoundingKernels() ? "yes" : "no");
  const char* pins = std::getenv("SPMD_KERNELS");
  facts.emplace_back("kernel pins (SPMD_KERNELS)", pins && *pins ? pins : "none");
  for (size_t i = 0; i < leaves.size(); ++i)
    if (axes[i].kind == Axis::Kind::Replicated) {
      const Array& a = leaves[i].array();
      facts.emplace_back("replicated input " + names[i], checksumText(a.data(), a.bytes()));
    }
  return facts;
}

// The runtime's replicated call carries out the compiled contract (runtime/exec/ReplicatedCall.h):
// binding by placement, donation by the Program's pairs, outputs left on the devices.
std::vector<Tensor> PmapCore::run(Entry& entry, const std::vector<Tensor>& leaves, const std::vector<size_t>& argumentLeaves) {
  const PmapOptions& o = state_->options;
  runtime::CallLayout layout{.stacked = {}, .perReplicaOutputs = o.allReplicas, .who = (state_->jit ? "jit '" : "pmap '") + o.name + "'"};
  for (Axis axis : entry.outputAxes) layout.stacked.push_back(axis.kind == Axis::Kind::Stacked);
  const std::vector<runtime::CallArgument> arguments =
      callArguments(leaves, donatedLeaves(o, argumentLeaves, leaves.size()));
  std::vector<Tensor> results;
  std::vector<runtime::ReplicaGroup*> micro;
  for (auto& group : entry.micro) micro.push_back(group.get());
  for (auto& value : !micro.empty() ? runtime::callAccumulated(entry.split, o.accumulate, micro, *entry.group,
                                                            arguments, layout, &state_->lastCall, &entry.fold)
                                 : runtime::callReplicated(*entry.group, arguments, layout, &state_->lastCall))
    results.push_back(Tensor(std::move(value)));
  return results;
}

}  // namespace spmd::detail

namespace spmd {

std::string writeTrace() { return runtime::timeline::write(); }

std::string bf16KernelPath(const std::string& devices) {
  return detail::bf16Choice(runtime::parseDeviceList(devices).driver()).path;  // "": SPMD_DEVICES, else cpu:1
}

}  // namespace spmd
