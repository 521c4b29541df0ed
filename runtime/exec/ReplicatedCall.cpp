// The replicated call: binding by placement, donation by the Program's pairs, assembly of outputs.
#include "runtime/exec/ReplicatedCall.h"

#include <algorithm>
#include <cstring>

#include "runtime/base/Error.h"
#include "runtime/exec/MeshParts.h"

namespace spmd::runtime {
namespace {

DeviceArray::Layout layoutOf(const Placement& placement) {
  switch (placement.kind) {
    case Placement::Kind::Replicated: return DeviceArray::Layout::Replicated;
    case Placement::Kind::Mapped: return DeviceArray::Layout::Sharded;
    case Placement::Kind::Sliced: return DeviceArray::Layout::Sliced;
    case Placement::Kind::Mesh: return DeviceArray::Layout::Mesh;
  }
  return DeviceArray::Layout::Replicated;
}

int firstReplica(const ReplicaGroup& group) { return group.job().info().rank * group.size(); }

// Whether `resident` is, on these devices, the value `placement` asks for in one replica's
// `local` shape: then it is bound in place.
bool bindsInPlace(const DeviceArray& resident, const Placement& placement, const Shape& local, const MeshShape& mesh,
                  const ReplicaGroup& group) {
  if (resident.donated() || !resident.livesOn(group.deviceObjects()) || resident.layout() != layoutOf(placement) ||
      resident.localShape() != local)
    return false;
  if (placement.kind == Placement::Kind::Sliced) return resident.slicing().firstReplica == firstReplica(group);
  if (placement.kind == Placement::Kind::Mesh)
    return resident.slicing().firstReplica == firstReplica(group) && resident.slicing().mesh == mesh &&
           resident.slicing().spec == placement.spec;
  return true;
}

}  // namespace

std::vector<std::vector<Input>> bindArguments(const std::vector<CallArgument>& arguments,
                                              const std::vector<Placement>& placements,
                                              const std::vector<Shape>& replicaShapes, const MeshShape& mesh,
                                              const ReplicaGroup& group, std::vector<bool>& bound) {
  const int devices = group.size(), first = firstReplica(group);
  std::vector<std::vector<Input>> inputs(devices);
  bound.assign(arguments.size(), false);
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Placement& placement = placements[i];
    const Shape& local = replicaShapes[i];
    const bool slice = placement.kind == Placement::Kind::Sliced;
    const auto& resident = arguments[i].resident;
    if (resident && bindsInPlace(*resident, placement, local, mesh, group)) {
      for (int r = 0; r < devices; ++r) inputs[r].push_back({Array{}, resident->buffer(r)});
      bound[i] = true;
      continue;
    }
    const Array& array = arguments[i].value();
    if (slice) {  // each replica's part of the flat tensor, the last ones padded with zeros
      const size_t width = size_t(local[0]) * dtypeSize(array.dtype);
      for (int r = 0; r < devices; ++r) {
        Array part = Array::zeros(array.dtype, local);
        const size_t from = size_t(first + r) * width;
        if (from < array.bytes()) std::memcpy(part.data(), array.data() + from, std::min(width, array.bytes() - from));
        inputs[r].push_back({std::move(part), nullptr});
      }
      continue;
    }
    if (placement.kind == Placement::Kind::Mesh) {  // each replica's block of the whole value
      const Shape part = meshPartShape(array.shape, array.dtype, mesh, placement.spec, "argument " + std::to_string(i));
      if (part != local)
        throw Error("argument " + std::to_string(i) + " " + std::string(dtypeName(array.dtype)) + shapeString(array.shape) +
                    " on mesh " + mesh.describe() + " by " + specString(placement.spec) + " gives each replica " +
                    shapeString(part) + ", but the program takes " + shapeString(local));
      for (int r = 0; r < devices; ++r) {
        Array block = Array::zeros(array.dtype, local);
        copyMeshPart(array, mesh, placement.spec, first + r, block.data());
        inputs[r].push_back({std::move(block), nullptr});
      }
      continue;
    }
    const size_t chunk = size_t(numElements(local)) * dtypeSize(array.dtype);
    for (int r = 0; r < devices; ++r)
      inputs[r].push_back(
          {placement.kind == Placement::Kind::Replicated ? array : Array::view(array, r * chunk, local), nullptr});
  }
  return inputs;
}

std::shared_ptr<DeviceArray> assembleOutput(DType dtype, const Shape& shape, const Placement& placement, bool stacked,
                                            bool perReplica, const MeshShape& mesh, const ReplicaGroup& group,
                                            std::vector<std::shared_ptr<std::byte>> buffers) {
  const int devices = group.size();
  if (placement.kind == Placement::Kind::Mesh) {  // the whole value, put together when read
    DeviceArray::Slicing spread;
    spread.firstReplica = firstReplica(group);
    spread.totalReplicas = devices * group.job().info().size;
    spread.mesh = mesh;
    spread.spec = placement.spec;
    const Job* job = &group.job();
    spread.gatherProcesses = [job](const std::string& mine) {
      return job->allGatherText(mine, "reading a value on a mesh (spmd::shardMap's result) on the host, which gathers "
                                      "its blocks from every process: read it on every process at the same point");
    };
    return std::make_shared<DeviceArray>(dtype, shape, meshWholeShape(shape, mesh, placement.spec),
                                         DeviceArray::Layout::Mesh, group.deviceObjects(), std::move(buffers),
                                         std::move(spread));
  }
  if (placement.kind == Placement::Kind::Sliced) {  // ZeRO-1: the full shape, one slice per replica of the job
    DeviceArray::Slicing slicing;
    slicing.firstReplica = firstReplica(group);
    slicing.totalReplicas = devices * group.job().info().size;
    const Job* job = &group.job();
    slicing.gatherProcesses = [job](const std::string& mine) {
      return job->allGatherText(mine, "reading a sliced (shardUpdate, ZeRO-1) tensor on the host, which gathers its "
                                      "slices from every process: read it on every process at the same point (e.g. "
                                      "before process 0 saves a checkpoint)");
    };
    return std::make_shared<DeviceArray>(dtype, shape, placement.full, DeviceArray::Layout::Sliced, group.deviceObjects(),
                                         std::move(buffers), std::move(slicing));
  }
  const bool mapped = placement.kind == Placement::Kind::Mapped;
  perReplica = perReplica || mapped;
  Shape global = shape;
  if (mapped && !stacked && !shape.empty())
    global[0] *= devices;
  else if (perReplica)
    global.insert(global.begin(), devices);
  return std::make_shared<DeviceArray>(dtype, shape, global,
                                       perReplica ? DeviceArray::Layout::Sharded : DeviceArray::Layout::Replicated,
                                       group.deviceObjects(), std::move(buffers));
}

void runDonating(ReplicaGroup& group, const std::vector<std::vector<Input>>& inputs,
                 std::vector<std::vector<Output>>& outputs, const std::vector<CallArgument>& arguments,
                 const std::vector<bool>& donors, const std::string& who, CallCounts* counts) {
  auto donate = [&](bool failed) {
    for (size_t i = 0; i < arguments.size(); ++i)
      if (donors[i]) arguments[i].resident->donate(who, failed);
  };
  for (size_t i = 0; i < arguments.size(); ++i)
    if (donors[i]) arguments[i].resident->checkDonatable(who);
  try {
    group.run(inputs, outputs);
  } catch (...) {
    donate(true);
    throw;
  }
  if (counts) *counts = group.lastCall();
  donate(false);
}

std::vector<std::shared_ptr<DeviceArray>> callReplicated(ReplicaGroup& group, const std::vector<CallArgument>& arguments,
                                                         const CallLayout& layout, CallCounts* counts) {
  const Program& program = group.program();
  if (program.inputPlacements.size() != program.inputs.size())
    throw Error("program @" + program.name + " has no call contract (a part of an accumulated step?); it cannot be "
                "called with arguments");
  if (arguments.size() != program.inputs.size())
    throw Error("program @" + program.name + " takes " + std::to_string(program.inputs.size()) + " arguments, not " +
                std::to_string(arguments.size()));
  const int devices = group.size();
  std::vector<Shape> shapes;
  for (int id : program.inputs) shapes.push_back(program.buffers[id].shape);
  std::vector<bool> bound;
  std::vector<std::vector<Input>> inputs =
      bindArguments(arguments, program.inputPlacements, shapes, program.mesh, group, bound);

  // Donation: an output takes its paired argument's buffers when that argument is donated and
  // was bound in place.
  std::vector<bool> donors(arguments.size());
  std::vector<std::vector<Output>> outputs(devices);
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const int i = program.outputDonors[k];
    const bool takes = i >= 0 && arguments[size_t(i)].donated && bound[size_t(i)] &&
                       !(layout.perReplicaOutputs && program.outputPlacements[k].kind == Placement::Kind::Replicated);
    if (takes) donors[size_t(i)] = true;
    for (int r = 0; r < devices; ++r) outputs[r].push_back({Array{}, true, takes ? inputs[r][size_t(i)].device : nullptr});
  }
  runDonating(group, inputs, outputs, arguments, donors, layout.who, counts);
  if (counts) counts->argumentsInPlace = std::count(bound.begin(), bound.end(), true);
  std::vector<std::shared_ptr<DeviceArray>> results;
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    std::vector<std::shared_ptr<std::byte>> buffers;
    for (int r = 0; r < devices; ++r) buffers.push_back(outputs[r][k].device);
    const BufferDesc& b = program.buffers[program.outputs[k]];
    results.push_back(assembleOutput(b.dtype, b.shape, program.outputPlacements[k],
                                     k < layout.stacked.size() && layout.stacked[k], layout.perReplicaOutputs,
                                     program.mesh, group, std::move(buffers)));
  }
  return results;
}

}  // namespace spmd::runtime
