// PmapCore: per-leaf mapping and checks, tracing one replica, compiling, distributing inputs
// as views (no copy on the CPU backend) and assembling outputs with one copy each.
#include "frontend/Pmap.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "frontend/Agreement.h"
#include "frontend/Trace.h"
#include "runtime/exec/DeviceArray.h"
#include "runtime/base/Timeout.h"
#include "runtime/device/Driver.h"
#include "runtime/dist/Processes.h"
#include "runtime/exec/ReplicaGroup.h"

namespace spmd::detail {

struct PmapCore::Entry {
  std::unique_ptr<runtime::ReplicaGroup> group;
  std::shared_ptr<void> prototype;
  std::vector<Axis> outputAxes;                    // per output leaf
  std::vector<std::pair<DType, Shape>> outputs;    // one replica's output types
  std::vector<std::string> outputNames;            // per output leaf ("0.fc.weight")
  int64_t calls = 0;
};

struct PmapCore::State {
  PmapOptions options;
  bool jit = false;  // spmd::jit: one device, no axis, every argument and output replicated
  runtime::DeviceList devices;
  std::chrono::milliseconds timeout{0};
  std::map<std::string, std::unique_ptr<Entry>> cache;
  // Calls from several threads queue (tracing, the cache, the replica group's arenas).
  std::mutex mutex;
};

namespace {

std::string prefix(const PmapOptions& options) { return "spmd::pmap '" + options.name + "': "; }
std::string jitPrefix(const PmapOptions& options) { return "jit '" + options.name + "': "; }

const char* tagOf(Axis axis) {
  switch (axis.kind) {
    case Axis::Kind::Replicated: return "replicated:";
    case Axis::Kind::Stacked: return "stacked:";
    case Axis::Kind::Split: return "split:";
  }
  return "";
}

// One replica's shape of a leaf, checking the leading axis against the device count.
Shape localShape(const Tensor& leaf, Axis axis, int devices, const std::string& name,
                 const PmapOptions& options) {
  const Shape& shape = leaf.shape();
  if (axis.kind == Axis::Kind::Replicated) return shape;
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

}  // namespace

PmapCore::PmapCore(PmapOptions options, bool jit) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->jit = jit;
  const PmapOptions& o = state_->options;
  if (o.axisName.empty())
    throw Error(prefix(o) + "axisName is empty; name the mapped axis (e.g. \"batch\")");
  for (const auto* axes : {&o.inAxes, &o.outAxes})
    for (Axis axis : *axes)
      if (axis.kind == Axis::Kind::Stacked && axis.dim != 0)
        throw Error(prefix(o) + "axis " + std::to_string(axis.dim) + " in " +
                    (axes == &o.inAxes ? "inAxes" : "outAxes") +
                    ": only the leading axis (0) can be mapped; transpose the data first");
  state_->devices = runtime::parseDeviceList(o.devices);
  if (jit && state_->devices.size() != 1)
    throw Error(jitPrefix(o) + "device list '" + state_->devices.spec + "' has " +
                std::to_string(state_->devices.size()) + " devices but jit runs on one; use spmd::pmap to run " +
                "one replica per device, or name one device (e.g. " + state_->devices.backend + ":1)");
  state_->timeout = runtime::collectiveTimeoutFromEnvironment(o.collectiveTimeoutSeconds);
  if (o.threadsPerReplica < 0)
    throw Error(prefix(o) + "threadsPerReplica is " + std::to_string(o.threadsPerReplica) +
                "; give a positive thread count, or 0 for the default share of the cores");
}

PmapCore::~PmapCore() = default;

int PmapCore::deviceCount() const { return state_->devices.size(); }
int PmapCore::threadsPerReplica(std::string* why) const {
  return state_->devices.driver().threadsPerReplica(state_->devices, state_->options.threadsPerReplica, why);
}

int PmapCore::globalDeviceCount() const {
  return state_->jit ? 1 : state_->devices.size() * runtime::processes().size;
}

std::pair<std::vector<Tensor>, std::shared_ptr<void>> PmapCore::call(
    const std::vector<Tensor>& leaves, const std::vector<size_t>& argumentLeaves,
    const std::vector<std::string>& names, const std::string& structure,
    const PmapTraceFn& traceFn) {
  const PmapOptions& o = state_->options;
  const int devices = deviceCount();
  if (!o.inAxes.empty() && o.inAxes.size() != argumentLeaves.size())
    throw Error(prefix(o) + "inAxes has " + std::to_string(o.inAxes.size()) +
                " entries but the function is called with " +
                std::to_string(argumentLeaves.size()) +
                " arguments; give one per argument (spmd::replicated, 0 or spmd::split)");
  for (int a : o.donateArguments)
    if (a < 0 || a >= static_cast<int>(argumentLeaves.size()))
      throw Error((state_->jit ? jitPrefix(o) : prefix(o)) + "donateArguments names argument " + std::to_string(a) +
                  " but the function is called with " + std::to_string(argumentLeaves.size()) + " arguments");
  std::vector<Axis> axes;
  for (size_t a = 0; a < argumentLeaves.size(); ++a)
    axes.insert(axes.end(), argumentLeaves[a],
                state_->jit ? replicated : o.inAxes.empty() ? Axis(0) : o.inAxes[a]);

  std::vector<Shape> local;
  std::vector<std::string> tags;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].defined())
      throw Error(prefix(o) + names[i] + " is an undefined tensor");
    if (leaves[i].isTraced())
      throw Error(prefix(o) + names[i] + " is a traced tensor; calling a pmapped function inside "
                  "another traced function is not supported, call the plain function instead");
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
    // The axis spans every process's devices (global replica = process * devices + local).
    if (!state_->jit) trace.bindAxis(o.axisName, devices * runtime::processes().size);
    std::vector<Tensor> arguments;
    for (size_t i = 0; i < leaves.size(); ++i)
      arguments.push_back(trace.addArgument(leaves[i].dtype(), local[i]));
    for (size_t i = 0; i < leaves.size(); ++i)  // after all arguments exist (attribute arrays)
      if (axes[i].kind != Axis::Kind::Replicated) trace.markArgumentMapped(i);
    PmapTraced traced = traceFn(arguments);
    if (!o.outAxes.empty() && o.outAxes.size() != traced.elementLeaves.size())
      throw Error(prefix(o) + "outAxes has " + std::to_string(o.outAxes.size()) +
                  " entries but the function returns " + std::to_string(traced.elementLeaves.size()) +
                  " outputs; give one per output (spmd::replicated, 0 or spmd::split)");
    for (size_t e = 0; e < traced.elementLeaves.size(); ++e)
      entry->outputAxes.insert(entry->outputAxes.end(), traced.elementLeaves[e],
                               state_->jit || o.outAxes.empty() ? replicated : o.outAxes[e]);
    trace.finish(traced.outputs, Loc::current());
    for (size_t i = 0; i < traced.outputs.size(); ++i)
      trace.describeResult(i, entry->outputAxes[i].kind != Axis::Kind::Replicated,
                           i < traced.names.size() ? traced.names[i] : "");
    // The NaN/Inf debug mode runs op by op (no fusion), so it can name the op at fault.
    const bool debugging = o.debugNans || o.debugInfs || runtime::debugNansFromEnvironment() ||
                           runtime::debugInfsFromEnvironment();
    runtime::Program program =
        compileTrace(trace,
                     {.dumpDir = o.dumpDir, .entry = "main", .strict = o.strict, .bucketBytes = o.bucketBytes,
                      .planMemory = o.planMemory, .fuseElementwise = o.fuseElementwise && !debugging,
                      // the debug scan reports plain indices
                      .channelBlock = o.assignLayouts && !debugging ? state_->devices.driver().channelBlock() : 0},
                     o.name);
    for (int id : program.outputs)
      entry->outputs.emplace_back(program.buffers[id].dtype, program.buffers[id].shape);
    entry->group = std::make_unique<runtime::ReplicaGroup>(program, state_->devices, state_->timeout,
                                                           o.threadsPerReplica);
    entry->group->enableDebugNonFinite(o.debugNans, o.debugInfs);
    entry->prototype = traced.prototype;
    for (size_t i = 0; i < traced.outputs.size(); ++i)
      entry->outputNames.push_back(i < traced.names.size() && !traced.names[i].empty() ? traced.names[i]
                                                                                        : "output " + std::to_string(i));
    if (!state_->jit && runtime::processes().size > 1)
      checkProcessesAgree(fingerprint(signature, structure, names, leaves, axes, *entry->group),
                          prefix(o) + "before the first step");
    found = state_->cache.emplace(signature, std::move(entry)).first;
  }
  called(signature);
  Entry& entry = *found->second;

  std::vector<Tensor> results = run(entry, leaves, axes, local, argumentLeaves);
  if (o.driftCheckEvery > 0 && ++entry.calls % o.driftCheckEvery == 0) {
    std::vector<std::pair<std::string, Tensor>> replicatedOutputs;
    for (size_t k = 0; k < results.size(); ++k)
      if (entry.outputAxes[k].kind == Axis::Kind::Replicated && !o.allReplicas)
        replicatedOutputs.emplace_back(entry.outputNames[k], results[k]);
    checkReplicasAgree(replicatedOutputs, prefix(o) + "drift check after call " + std::to_string(entry.calls));
  }
  return {std::move(results), entry.prototype};
}

std::vector<std::pair<std::string, std::string>> PmapCore::fingerprint(const std::string& signature, const std::string& structure,
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
    facts.emplace_back("argument " + names[i], std::string(tagOf(axes[i])) + leaves[i].typeString());
  uint64_t hash = 1469598103934665603ull;  // FNV-1a of the traced IR (constants a closure captured included)
  for (char c : lastTracedIr()) hash = (hash ^ uint8_t(c)) * 1099511628211ull;
  char hex[20];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  facts.emplace_back("traced step (IR hash; a value the function captured, such as a flag, differs)", hex);
  facts.emplace_back("threads per replica", std::to_string(group.threadsPerReplica()));
  facts.emplace_back("reduction mode (SPMD_REDUCE)", runtime::reduceModeName(runtime::reduceModeFromEnvironment()));
  for (size_t i = 0; i < leaves.size(); ++i)
    if (axes[i].kind == Axis::Kind::Replicated) {
      const Array& a = leaves[i].array();
      facts.emplace_back("replicated input " + names[i], checksumText(a.data(), a.bytes()));
    }
  (void)signature;
  return facts;
}

std::vector<Tensor> PmapCore::run(Entry& entry, const std::vector<Tensor>& leaves, const std::vector<Axis>& axes,
                                  const std::vector<Shape>& local, const std::vector<size_t>& argumentLeaves) {
  const PmapOptions& o = state_->options;
  const int devices = deviceCount();
  runtime::ReplicaGroup& group = *entry.group;
  const runtime::Program& program = group.program();
  std::vector<std::shared_ptr<runtime::Device>> deviceObjects;
  for (int r = 0; r < devices; ++r) deviceObjects.push_back(group.device(r));

  // Inputs: a value already on these devices in the right layout is bound in place; anything
  // else comes from the host (replicated leaves shared, mapped ones as views of each chunk).
  std::vector<std::vector<runtime::Input>> inputs(devices);
  std::vector<bool> bound(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto& resident = leaves[i].resident();
    auto wanted = axes[i].kind == Axis::Kind::Replicated ? runtime::DeviceArray::Layout::Replicated
                                                          : runtime::DeviceArray::Layout::Sharded;
    if (resident && !resident->donated() && resident->livesOn(deviceObjects) && resident->layout() == wanted &&
        resident->localShape() == local[i]) {
      for (int r = 0; r < devices; ++r) inputs[r].push_back({Array{}, resident->buffer(r)});
      bound[i] = true;
      continue;
    }
    const Array& array = leaves[i].array();
    size_t chunk = static_cast<size_t>(numElements(local[i])) * dtypeSize(array.dtype);
    for (int r = 0; r < devices; ++r)
      inputs[r].push_back({axes[i].kind == Axis::Kind::Replicated ? array : Array::view(array, r * chunk, local[i]),
                           nullptr});
  }

  // Donation: each donated leaf bound in place gives its buffers to the first output not yet
  // taken with its dtype, shape and layout (jax's donate_argnums), except outputs that pass an
  // input through unchanged (their copy must read the inputs before any is overwritten).
  std::vector<bool> donated(leaves.size());
  for (int a : o.donateArguments) {
    size_t first = 0;
    for (int k = 0; k < a; ++k) first += argumentLeaves[k];
    for (size_t i = first; i < first + argumentLeaves[a]; ++i) donated[i] = bound[i];
  }
  std::vector<bool> passthrough(program.outputs.size());
  for (size_t k = 0; k < program.outputs.size(); ++k)
    for (int id : program.inputs) passthrough[k] = passthrough[k] || id == program.outputs[k];
  std::vector<int> donorOf(entry.outputs.size(), -1);
  std::vector<bool> outputTaken(entry.outputs.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!donated[i]) continue;
    for (size_t k = 0; k < entry.outputs.size(); ++k) {
      bool perReplica = entry.outputAxes[k].kind != Axis::Kind::Replicated || o.allReplicas;
      if (outputTaken[k] || passthrough[k] || perReplica != (axes[i].kind != Axis::Kind::Replicated) ||
          entry.outputs[k].first != leaves[i].dtype() || entry.outputs[k].second != local[i])
        continue;
      donorOf[k] = static_cast<int>(i);
      outputTaken[k] = true;
      break;
    }
  }

  // Outputs stay on the devices: every replica keeps its own (a replicated output once per
  // replica, a mapped one as that replica's chunk), written into a donor's buffers when there
  // is one. Nothing is copied to the host until the caller reads a value.
  std::vector<std::vector<runtime::Output>> outputs(devices);
  for (size_t k = 0; k < entry.outputs.size(); ++k)
    for (int r = 0; r < devices; ++r)
      outputs[r].push_back({Array{}, true, donorOf[k] >= 0 ? inputs[r][donorOf[k]].device : nullptr});
  group.run(inputs, outputs);

  for (size_t i = 0; i < leaves.size(); ++i)
    if (std::count(donorOf.begin(), donorOf.end(), static_cast<int>(i)))
      leaves[i].resident()->donate("pmap '" + o.name + "'");
  std::vector<Tensor> results;
  for (size_t k = 0; k < entry.outputs.size(); ++k) {
    auto [dtype, shape] = entry.outputs[k];
    Axis axis = entry.outputAxes[k];
    bool perReplica = axis.kind != Axis::Kind::Replicated || o.allReplicas;
    Shape global = shape;
    if (axis.kind == Axis::Kind::Split && !shape.empty())
      global[0] *= devices;
    else if (perReplica)
      global.insert(global.begin(), devices);
    std::vector<std::shared_ptr<std::byte>> buffers;
    for (int r = 0; r < devices; ++r) buffers.push_back(outputs[r][k].device);
    results.emplace_back(std::make_shared<runtime::DeviceArray>(
        dtype, shape, global,
        perReplica ? runtime::DeviceArray::Layout::Sharded : runtime::DeviceArray::Layout::Replicated,
        deviceObjects, std::move(buffers)));
  }
  return results;
}

}  // namespace spmd::detail
