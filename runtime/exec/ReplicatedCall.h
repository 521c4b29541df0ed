// The replicated call: a Program's call contract (Program::inputPlacements, outputPlacements,
// outputDonors) carried out on a ReplicaGroup, as JAX's InputsHandler, ExecuteReplicated and
// ResultsHandler are for pmap. Each argument is bound by its placement: a value already on the
// group's devices in that placement and shape is bound in place; anything else comes from the
// host (a replicated value shared by the replicas, a mapped one as each replica's chunk, a
// sliced one as this process's replicas' slices of the flat value, a mesh one as each replica's
// block of the whole value, runtime/exec/MeshParts.h). Outputs stay on the devices
// as DeviceArrays; a donated argument bound in place gives its buffers to the output the Program
// pairs it with, and can no longer be used after the call, whether it succeeded or not.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/exec/DeviceArray.h"
#include "runtime/exec/ReplicaGroup.h"

namespace spmd::runtime {

// One argument: a value on devices (`resident`) or on the host (`host`, which the caller keeps
// alive for the call), and whether the caller donates it.
struct CallArgument {
  std::shared_ptr<DeviceArray> resident;
  const Array* host = nullptr;
  bool donated = false;
  const Array& value() const { return resident ? resident->host() : *host; }
};

// How the caller sees the outputs, beyond the Program's placements.
struct CallLayout {
  // Per output: a mapped output's replicas' parts stacked into a new leading axis ([replicas,
  // ...]: pmap's axis 0) instead of concatenated along the first (spmd::split).
  std::vector<bool> stacked;
  // Every output held per replica, replicated ones too (PmapOptions::allReplicas); replicated
  // outputs then take no donor's buffers.
  bool perReplicaOutputs = false;
  // "pmap 'step'": how a donated value's later errors name the call that took it.
  std::string who;
};

// Each replica's inputs for `arguments`, with their placements and one replica's shapes (a
// sliced one's is its slice). bound[i] is set for an argument bound in place.
std::vector<std::vector<Input>> bindArguments(const std::vector<CallArgument>& arguments,
                                              const std::vector<Placement>& placements,
                                              const std::vector<Shape>& replicaShapes, const MeshShape& mesh,
                                              const ReplicaGroup& group, std::vector<bool>& bound);

// Output k of one replica's `dtype` and `shape`, held in `buffers` (one per replica), as the
// value the caller receives.
std::shared_ptr<DeviceArray> assembleOutput(DType dtype, const Shape& shape, const Placement& placement, bool stacked,
                                            bool perReplica, const MeshShape& mesh, const ReplicaGroup& group,
                                            std::vector<std::shared_ptr<std::byte>> buffers);

// Runs `group`'s program (which must have a call contract) on `arguments`, one per input;
// returns one value per output. `counts`, when given, receives what the run did.
std::vector<std::shared_ptr<DeviceArray>> callReplicated(ReplicaGroup& group, const std::vector<CallArgument>& arguments,
                                                         const CallLayout& layout, CallCounts* counts = nullptr);

// Runs `group` on `inputs` into `outputs`; then every argument in `donors` gives its buffers
// away, also when the run failed (a failed step may have written into them already).
void runDonating(ReplicaGroup& group, const std::vector<std::vector<Input>>& inputs,
                 std::vector<std::vector<Output>>& outputs, const std::vector<CallArgument>& arguments,
                 const std::vector<bool>& donors, const std::string& who, CallCounts* counts);

}  // namespace spmd::runtime
