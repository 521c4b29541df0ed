// checkProgram: a Program's fields against each other (see ProgramCheck.h).
#include "runtime/program/ProgramCheck.h"

#include <algorithm>
#include <set>
#include <string>

#include "runtime/base/ElementwiseTable.h"
#include "runtime/base/Error.h"
#include "runtime/program/Catalog.h"
#include "runtime/program/FusedBody.h"
#include "runtime/program/MemoryPlan.h"

namespace spmd::runtime {
namespace {

constexpr int64_t kMaxElements = int64_t(1) << 40;

int elementwiseArity(const std::string& op) {
  static const std::map<std::string, int> arity = {
#define SPMD_ARITY(name, Functor, n, formula) {#name, n},
      SPMD_ELEMENTWISE_OPS(SPMD_ARITY)
#undef SPMD_ARITY
  };
  auto it = arity.find(op);
  return it == arity.end() ? 0 : it->second;
}

// The kind an attribute value has (Attr's alternatives in order: bool, int64, double, ints, string).
AttrKind kindOf(const Attr& value) {
  constexpr AttrKind kinds[] = {AttrKind::Flag, AttrKind::Int, AttrKind::Real, AttrKind::Ints, AttrKind::Text};
  return kinds[value.index()];
}

// The step's attributes against the catalog's: each one the op has, of its kind, and no other;
// a reduction one of the known kinds.
void checkAttributes(const Step& step, const std::string& where) {
  std::span<const AttrSpec> specs = programAttributes(step.op);
  for (const AttrSpec& spec : specs) {
    auto it = step.attrs.find(std::string(spec.name));
    if (it == step.attrs.end()) {
      if (spec.required)
        throw Error(where + " has no attribute '" + std::string(spec.name) + "' (" + attrKindName(spec.kind) + ")");
      continue;
    }
    if (kindOf(it->second) != spec.kind)
      throw Error(where + ": attribute '" + it->first + "' is " + attrKindName(kindOf(it->second)) + ", not " +
                  attrKindName(spec.kind));
    if (spec.name == "reduction") try {
        parseReduction(std::get<std::string>(it->second));
      } catch (const Error& e) {
        throw Error(where + ": " + e.what());
      }
  }
  for (const auto& [name, value] : step.attrs) {
    bool known = false;
    for (const AttrSpec& spec : specs) known = known || spec.name == name;
    if (!known) throw Error(where + " has an attribute '" + name + "' that op " + step.op + " does not take");
  }
}

// A mesh placement against the program's mesh and the buffer's rank: every axis the spec names
// is the mesh's, and splits one dimension.
void checkMeshPlacement(const Program& p, const std::string& what, const Placement& placement, size_t rank) {
  if (placement.spec.size() > rank)
    throw Error(what + " has " + std::to_string(rank) + " dimension(s) but its spec " + specString(placement.spec) +
                " names " + std::to_string(placement.spec.size()));
  if (p.mesh.empty() || p.mesh.names.size() != p.mesh.sizes.size() || p.mesh.replicas() != p.replicas)
    throw Error(what + " lies on a mesh, but the program's mesh " + p.mesh.describe() + " is not one of its " +
                std::to_string(p.replicas) + " replicas");
  for (size_t d = 0; d < placement.spec.size(); ++d) {
    const std::string& axis = placement.spec[d];
    if (axis.empty()) continue;
    if (p.mesh.index(axis) < 0)
      throw Error(what + " is split by " + specString(placement.spec) + " over axis '" + axis + "', which mesh " +
                  p.mesh.describe() + " does not have");
    if (std::count(placement.spec.begin(), placement.spec.end(), axis) > 1)
      throw Error(what + " is split twice over axis '" + axis + "' by " + specString(placement.spec));
  }
}

// The call contract (Program::inputPlacements, outputPlacements, outputDonors) against the
// inputs, outputs, buffers and replica count.
template <typename Describe>
void checkCallContract(const Program& p, const std::string& prefix, const Describe& buffer) {
  // A part of an accumulated step has no caller, so no placements; its apply part may pair
  // donors (runtime/exec/AccumulatedCall binds them), checked below but for placement.
  const bool part = p.inputPlacements.empty() && p.outputPlacements.empty();
  if (part && p.outputDonors.empty()) return;
  if ((!part && (p.inputPlacements.size() != p.inputs.size() || p.outputPlacements.size() != p.outputs.size())) ||
      p.outputDonors.size() != p.outputs.size())
    throw Error(prefix + "the call contract has " + std::to_string(p.inputPlacements.size()) + " input placements, " +
                std::to_string(p.outputPlacements.size()) + " output placements and " +
                std::to_string(p.outputDonors.size()) + " output donors for " + std::to_string(p.inputs.size()) +
                " inputs and " + std::to_string(p.outputs.size()) + " outputs; it needs one of each per input and output");
  auto check = [&](const std::string& what, int id, const Placement& placement) {
    if (placement.kind != Placement::Kind::Sliced && !placement.full.empty())
      throw Error(prefix + what + " " + buffer(id) + " is " + placementName(placement.kind) +
                  " but names a full shape; only a sliced one has one");
    if (placement.kind != Placement::Kind::Mesh && !placement.spec.empty())
      throw Error(prefix + what + " " + buffer(id) + " is " + placementName(placement.kind) +
                  " but names a mesh spec; only a mesh one has one");
    if (placement.kind == Placement::Kind::Replicated) return;
    if (p.axisName.empty())
      throw Error(prefix + what + " " + buffer(id) + " is " + placementName(placement.kind) +
                  ", but the program has no axis to map or slice it over");
    if (placement.kind == Placement::Kind::Mesh) return checkMeshPlacement(p, prefix + what + " " + buffer(id), placement, p.buffers[id].shape.size());
    if (placement.kind != Placement::Kind::Sliced) return;  // a mapped scalar stacks into [replicas]
    int64_t elements = 1;
    for (int64_t d : placement.full) {
      if (d < 0 || (d > 0 && elements > kMaxElements / d))
        throw Error(prefix + what + " " + buffer(id) + " is a slice of " + shapeString(placement.full) +
                    ", which is not a valid shape");
      elements *= d;
    }
    const int64_t parts = p.deviceReplicas(), slice = elements / parts + (elements % parts != 0);
    if (p.buffers[id].shape != Shape{slice})
      throw Error(prefix + what + " " + buffer(id) + " is a slice of " + shapeString(placement.full) + " over " +
                  std::to_string(parts) + " replicas, which is [" + std::to_string(slice) + "] elements");
  };
  if (!part)
    for (size_t i = 0; i < p.inputs.size(); ++i) check("input " + std::to_string(i), p.inputs[i], p.inputPlacements[i]);
  std::vector<bool> donating(p.inputs.size());
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const std::string what = "output " + std::to_string(k);
    if (!part) check(what, p.outputs[k], p.outputPlacements[k]);
    const int donor = p.outputDonors[k];
    if (donor == -1) continue;
    if (donor < 0 || donor >= int(p.inputs.size()))
      throw Error(prefix + what + " takes the buffers of input " + std::to_string(donor) + " of " +
                  std::to_string(p.inputs.size()));
    if (donating[donor])
      throw Error(prefix + "input " + std::to_string(donor) + " gives its buffers to two outputs");
    donating[donor] = true;
    const int from = p.inputs[donor], to = p.outputs[k];
    if (std::count(p.inputs.begin(), p.inputs.end(), to))
      throw Error(prefix + what + " passes an input through, so it cannot take input " + std::to_string(donor) +
                  "'s buffers (its copy reads the inputs)");
    if (p.buffers[from].dtype != p.buffers[to].dtype || p.buffers[from].shape != p.buffers[to].shape ||
        (!part && p.inputPlacements[donor] != p.outputPlacements[k]))
      throw Error(prefix + what + " " + buffer(to) + (part ? "" : std::string(" (") + placementName(p.outputPlacements[k].kind) + ")") +
                  " takes the buffers of input " + std::to_string(donor) + " " + buffer(from) +
                  (part ? "" : std::string(" (") + placementName(p.inputPlacements[donor].kind) + ")") +
                  "; they need the same dtype, shape and placement");
  }
}

}  // namespace

void checkProgram(const Program& p) {
  const std::string prefix = "program @" + p.name + ": ";
  auto buffer = [&](int id) {
    const BufferDesc& b = p.buffers[id];
    return "buffer %" + std::to_string(id) + " (" + std::string(dtypeName(b.dtype)) + shapeString(b.shape) + ")";
  };
  for (size_t id = 0; id < p.buffers.size(); ++id) {
    int64_t elements = 1;
    for (int64_t d : p.buffers[id].shape) {
      if (d < 0) throw Error(prefix + buffer(int(id)) + " has a negative dimension");
      if (d > 0 && elements > kMaxElements / d)
        throw Error(prefix + buffer(int(id)) + " has more than 2^40 elements; no buffer is that large");
      elements *= d;
    }
    if (!p.buffers[id].constant.empty() && p.buffers[id].constant.size() != p.buffers[id].bytes())
      throw Error(prefix + buffer(int(id)) + " is a constant of " + std::to_string(p.buffers[id].constant.size()) +
                  " bytes, not its shape's " + std::to_string(p.buffers[id].bytes()));
  }
  const int n = int(p.buffers.size());
  auto valid = [&](int id, const std::string& what) {
    if (id < 0 || id >= n) throw Error(prefix + what + " names buffer " + std::to_string(id) + " of " + std::to_string(n));
  };
  std::vector<bool> defined(n), written(n), isInput(n);
  for (int id : p.inputs) {
    valid(id, "inputs");
    if (isInput[id]) throw Error(prefix + buffer(id) + " is listed as an input twice");
    isInput[id] = defined[id] = true;
  }
  for (int id = 0; id < n; ++id)  // an empty buffer (a zero extent: a constant of no bytes too) holds nothing to write
    if (!p.buffers[id].constant.empty() || p.buffers[id].bytes() == 0) defined[id] = true;
  if (p.replicas < 1 || (p.axisName.empty() && p.replicas != 1))
    throw Error(prefix + "replicas " + std::to_string(p.replicas) + " is not valid" +
                (p.axisName.empty() ? " for a program without an axis (must be 1)" : " (must be >= 1)"));
  if (p.microBatches < 1 || p.replicas % p.microBatches != 0)
    throw Error(prefix + "micro_batches " + std::to_string(p.microBatches) + " does not divide its " +
                std::to_string(p.replicas) + " replicas (gradient accumulation runs that many on each device)");
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const Step& step = p.steps[s];
    const std::string at = "step " + std::to_string(s) + " '" + step.op + "' (" + step.where() + ")";
    if (!isProgramOp(step.op))
      throw Error(prefix + at + ": no such op in this spmd's catalog (runtime/program/Catalog.h); was the program "
                  "written by another version of spmd? compile it again");
    checkAttributes(step, prefix + at);
    if (auto it = step.attrs.find("segments"); it != step.attrs.end()) {  // compiler/BatchFused's steps
      const int64_t k = std::get<int64_t>(it->second);
      if (k < 1 || step.outputs.empty() || step.inputs.size() % size_t(k) != 0 || step.outputs.size() % size_t(k) != 0)
        throw Error(prefix + at + ": " + std::to_string(k) + " segments do not split its " +
                    std::to_string(step.inputs.size()) + " inputs and " + std::to_string(step.outputs.size()) +
                    " outputs evenly");
      const int64_t most = maxFusedSegments(step.inputs.size() / size_t(k), step.outputs.size() / size_t(k));
      if (k > most)
        throw Error(prefix + at + ": " + std::to_string(k) + " segments, more than the " + std::to_string(most) +
                    " one kernel's parameters hold");
    }
    for (int id : step.inputs) {
      valid(id, at + " input");
      if (!defined[id]) throw Error(prefix + at + " reads " + buffer(id) + " before any step writes it");
    }
    if (step.op == "fused") {  // its body and its operands' types (bf16 ones where it computes in f32)
      const size_t k = step.attrs.count("segments") ? size_t(step.integer("segments")) : 1;
      std::vector<DType> inputs, outputs;
      for (int id : step.inputs) inputs.push_back(p.buffers[id].dtype);
      for (int id : step.outputs) {
        valid(id, at + " output");
        outputs.push_back(p.buffers[id].dtype);
      }
      try {
        FusedBody::parse(step.text("body")).checkArity(step.inputs.size() / k, step.outputs.size() / k);
        fusedComputeType(inputs, outputs);
      } catch (const Error& e) {
        throw Error(prefix + at + ": " + e.what());
      }
    }
    for (int id : step.outputs) {
      valid(id, at + " output");
      if (isInput[id] || !p.buffers[id].constant.empty())
        throw Error(prefix + at + " writes " + buffer(id) + ", which is an input or a constant");
      if (written[id]) throw Error(prefix + at + " writes " + buffer(id) + ", which an earlier step wrote");
      written[id] = defined[id] = true;
    }
    auto same = [&](int a, int b) {
      return p.buffers[a].dtype == p.buffers[b].dtype && p.buffers[a].shape == p.buffers[b].shape;
    };
    if (int arity = elementwiseArity(step.op)) {
      if (int(step.inputs.size()) != arity || step.outputs.size() != 1)
        throw Error(prefix + at + " needs " + std::to_string(arity) + " operands and one result");
      for (int id : step.inputs)
        if (!same(id, step.outputs[0]))
          throw Error(prefix + at + ": operand " + buffer(id) + " does not match its result " + buffer(step.outputs[0]));
    }
    const bool collective = exchangesBetweenReplicas(step.op) || step.op == "axis_index";
    if (collective && p.axisName.empty())
      throw Error(prefix + at + " is a collective, but the program has no axis");
    auto bytesOf = [&](int id) { return p.buffers[id].bytes(); };
    // Replica groups (all_reduce, all_gather, reduce_scatter, all_to_all): every replica once, in
    // groups of group_size; 0 where the step has none.
    int64_t groupSize = 0;
    if (step.op == "all_reduce" || step.op == "all_gather" || step.op == "reduce_scatter" || step.op == "all_to_all") {
      if (step.attrs.count("replica_groups") != step.attrs.count("group_size"))
        throw Error(prefix + at + ": replica_groups and group_size come together (one is missing)");
      if (step.attrs.count("replica_groups")) {
        const std::vector<int64_t>& groups = step.ints("replica_groups");
        groupSize = step.integer("group_size");
        std::set<int64_t> seen;
        for (int64_t r : groups)
          if (r < 0 || r >= p.replicas || !seen.insert(r).second)
            throw Error(prefix + at + ": replica_groups names replica " + std::to_string(r) +
                        ", outside the program's " + std::to_string(p.replicas) + " replicas or a second time");
        if (groupSize < 1 || p.replicas % groupSize != 0 || int64_t(groups.size()) != p.replicas)
          throw Error(prefix + at + ": replica_groups must hold each of the program's " + std::to_string(p.replicas) +
                      " replicas once, in groups of group_size " + std::to_string(groupSize));
      }
    }
    if (step.op == "all_reduce") {
      if (step.inputs.size() != step.outputs.size() || step.inputs.empty())
        throw Error(prefix + at + " needs as many results as operands");
      for (size_t i = 0; i < step.inputs.size(); ++i)
        if (!same(step.inputs[i], step.outputs[i]))
          throw Error(prefix + at + ": result " + buffer(step.outputs[i]) + " does not match its operand " +
                      buffer(step.inputs[i]));
    }
    if (step.op == "all_to_all") {
      if (step.inputs.size() != 1 || step.outputs.size() != 1)
        throw Error(prefix + at + " needs one operand and one result");
      const Shape& in = p.buffers[step.inputs[0]].shape;
      Shape want = in;
      const int64_t split = step.integer("split_axis"), concat = step.integer("concat_axis");
      const int64_t n = groupSize > 0 ? groupSize : p.replicas;  // within groups: the group's members
      const bool axes = split >= 0 && split < int64_t(in.size()) && concat >= 0 && concat < int64_t(in.size());
      if (axes && in[size_t(split)] % n == 0) want[size_t(split)] /= n, want[size_t(concat)] *= n;
      if (!axes || in[size_t(split)] % n || step.integer("axis_size") != n || p.buffers[step.outputs[0]].shape != want ||
          p.buffers[step.outputs[0]].dtype != p.buffers[step.inputs[0]].dtype)
        throw Error(prefix + at + ": " + buffer(step.outputs[0]) + " is not " + buffer(step.inputs[0]) +
                    " split along axis " + std::to_string(split) + " and concatenated along axis " +
                    std::to_string(concat) + " over " +
                    (groupSize > 0 ? "groups of " + std::to_string(n) + " replicas"
                                   : "the program's " + std::to_string(n) + " replicas"));
    }
    if (step.op == "ppermute") {
      if (step.inputs.size() != 1 || step.outputs.size() != 1 || !same(step.inputs[0], step.outputs[0]))
        throw Error(prefix + at + " needs one operand and a result of its type");
      const std::vector<int64_t>& pairs = step.ints("pairs");
      std::set<int64_t> sources, destinations;
      for (size_t i = 0; i + 1 < pairs.size(); i += 2)
        if (pairs[i] < 0 || pairs[i] >= p.replicas || pairs[i + 1] < 0 || pairs[i + 1] >= p.replicas ||
            !sources.insert(pairs[i]).second || !destinations.insert(pairs[i + 1]).second)
          throw Error(prefix + at + ": pair (" + std::to_string(pairs[i]) + ", " + std::to_string(pairs[i + 1]) +
                      ") is outside the program's " + std::to_string(p.replicas) +
                      " replicas or repeats a source or destination");
      if (pairs.size() % 2) throw Error(prefix + at + ": pairs has an odd number of entries");
    }
    if (step.op == "all_gather" || step.op == "reduce_scatter") {
      if (step.inputs.size() != 1 || step.outputs.size() != 1)
        throw Error(prefix + at + " needs one operand and one result");
      if (step.op == "reduce_scatter" && step.text("reduction") != "sum" && step.text("reduction") != "mean")
        throw Error(prefix + at + ": reduction '" + step.text("reduction") + "' is not one a reduce_scatter takes (sum or mean)");
      bool gather = step.op == "all_gather";
      int small = gather ? step.inputs[0] : step.outputs[0], large = gather ? step.outputs[0] : step.inputs[0];
      // Over the replicas, or with accumulation over the devices (the sliced parameters' parts).
      auto spans = [&](int64_t parts) {
        return bytesOf(large) == bytesOf(small) * size_t(parts) &&
               (gather || (!p.buffers[large].shape.empty() && p.buffers[large].shape[0] == parts));
      };
      if (groupSize > 0) {  // within groups: the group's members, one row each
        if (p.buffers[small].dtype != p.buffers[large].dtype || !spans(groupSize))
          throw Error(prefix + at + ": " + buffer(large) + " is not " + std::to_string(groupSize) +
                      " (the group size) times " + buffer(small));
        if (!gather && step.text("reduction") != "sum")
          throw Error(prefix + at + ": within replica groups a reduce_scatter sums (reduction sum)");
      } else if (p.buffers[small].dtype != p.buffers[large].dtype || (!spans(p.replicas) && !spans(p.deviceReplicas()))) {
        throw Error(prefix + at + ": " + buffer(large) + " is not " + std::to_string(p.replicas) +
                    " (the program's replicas)" +
                    (p.microBatches > 1 ? " or " + std::to_string(p.deviceReplicas()) + " (its devices)" : "") +
                    " times " + buffer(small));
      }
    }
  }
  for (int id : p.outputs) {
    valid(id, "outputs");
    if (!defined[id]) throw Error(prefix + "output " + buffer(id) + " is never written");
  }
  checkCallContract(p, prefix, buffer);
  checkMemoryPlan(p);
}

}  // namespace spmd::runtime
