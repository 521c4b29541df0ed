// PmapCore: per-leaf mapping and checks, tracing one replica, compiling, distributing inputs
// as views (no copy on the CPU backend) and assembling outputs with one copy each.
#include "frontend/Pmap.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>

#include "frontend/Trace.h"
#include "runtime/ReplicaGroup.h"

namespace spmd::detail {

struct PmapCore::Entry {
  std::unique_ptr<runtime::ReplicaGroup> group;
  std::shared_ptr<void> prototype;
  std::vector<Axis> outputAxes;                    // per output leaf
  std::vector<std::pair<DType, Shape>> outputs;    // one replica's output types
};

struct PmapCore::State {
  PmapOptions options;
  runtime::DeviceList devices;
  std::chrono::milliseconds timeout{0};
  std::map<std::string, std::unique_ptr<Entry>> cache;
  // Calls from several threads queue (tracing, the cache, the replica group's arenas).
  std::mutex mutex;
};

namespace {

std::string prefix(const PmapOptions& options) { return "spmd::pmap '" + options.name + "': "; }

std::chrono::milliseconds timeoutOf(const PmapOptions& options) {
  double seconds = options.collectiveTimeoutSeconds;
  if (seconds <= 0) {
    const char* env = std::getenv("SPMD_COLLECTIVE_TIMEOUT");
    seconds = 300;
    if (env && *env) {
      char* end = nullptr;
      seconds = std::strtod(env, &end);
      if (*end || !(seconds > 0))
        throw Error("SPMD_COLLECTIVE_TIMEOUT='" + std::string(env) +
                    "' must be a positive number of seconds");
    }
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

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

PmapCore::PmapCore(PmapOptions options) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
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
  state_->timeout = timeoutOf(o);
}

PmapCore::~PmapCore() = default;

int PmapCore::deviceCount() const { return state_->devices.size(); }

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
  std::vector<Axis> axes;
  for (size_t a = 0; a < argumentLeaves.size(); ++a)
    axes.insert(axes.end(), argumentLeaves[a], o.inAxes.empty() ? Axis(0) : o.inAxes[a]);

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
  std::string signature = signatureOf(leaves, structure, tags);
  auto found = state_->cache.find(signature);
  if (found == state_->cache.end()) {
    beginCompile(signature, "pmap '" + o.name + "' on " + state_->devices.spec);
    auto entry = std::make_unique<Entry>();
    Trace trace(o.name);
    trace.bindAxis(o.axisName, devices);
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
                               o.outAxes.empty() ? replicated : o.outAxes[e]);
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
                      .planMemory = o.planMemory, .fuseElementwise = o.fuseElementwise && !debugging},
                     o.name);
    for (int id : program.outputs)
      entry->outputs.emplace_back(program.buffers[id].dtype, program.buffers[id].shape);
    entry->group = std::make_unique<runtime::ReplicaGroup>(program, state_->devices, state_->timeout);
    entry->group->enableDebugNonFinite(o.debugNans, o.debugInfs);
    entry->prototype = traced.prototype;
    found = state_->cache.emplace(signature, std::move(entry)).first;
  }
  called(signature);
  Entry& entry = *found->second;

  // Inputs: replicated leaves are shared, mapped ones are views of each device's chunk.
  std::vector<std::vector<Array>> inputs(devices), outputs(devices);
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Array& array = leaves[i].array();
    size_t chunk = static_cast<size_t>(numElements(local[i])) * dtypeSize(array.dtype);
    for (int r = 0; r < devices; ++r)
      inputs[r].push_back(axes[i].kind == Axis::Kind::Replicated
                              ? array
                              : Array::view(array, r * chunk, local[i]));
  }
  // Outputs: mapped (and, when asked, replicated) outputs are written by every replica into
  // its part of one array; replicated ones otherwise by replica 0 only.
  std::vector<Tensor> results;
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    auto [dtype, shape] = entry.outputs[i];
    Axis axis = entry.outputAxes[i];
    bool perReplica = axis.kind != Axis::Kind::Replicated || o.allReplicas;
    Shape global = shape;
    if (axis.kind == Axis::Kind::Split && !shape.empty())
      global[0] *= devices;
    else if (perReplica)
      global.insert(global.begin(), devices);
    Array whole = Array::zeros(dtype, global);
    size_t chunk = static_cast<size_t>(numElements(shape)) * dtypeSize(dtype);
    for (int r = 0; r < devices; ++r)
      outputs[r].push_back(perReplica || r == 0 ? Array::view(whole, perReplica ? r * chunk : 0, shape)
                                                : Array{dtype, shape, nullptr, 0});
    results.emplace_back(whole);
  }
  entry.group->run(inputs, outputs);
  return {std::move(results), entry.prototype};
}

}  // namespace spmd::detail
