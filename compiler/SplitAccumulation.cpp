// splitForAccumulation: classify steps, then extract the micro and apply Programs.
#include "compiler/SplitAccumulation.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "runtime/base/Error.h"
#include "runtime/program/Catalog.h"

namespace spmd {
namespace {

using runtime::Program;

// A step that multiplies `from` by `factor` into `to` (of its type): a fused step, so every
// backend runs it.
runtime::Step scaleStep(const runtime::Step& at, int from, int to, int factor) {
  return {"fused", {from}, {to}, {{"body", "%0 = load 0; %1 = const " + std::to_string(factor) + "; %2 = mul %0 %1; yield %2"}},
          at.location, at.layer};
}

// A Program of `steps` (in order) with the given inputs and outputs, its buffers renumbered.
// scale(s, k) > 1 multiplies operand k of step s by it first, into a buffer of its own.
Program extract(const Program& p, const std::vector<int>& steps, const std::vector<int>& inputs,
                const std::vector<int>& outputs, const std::function<int(int, size_t)>& scale = {}) {
  Program out;
  out.name = p.name, out.axisName = p.axisName, out.replicas = p.replicas, out.microBatches = p.microBatches;
  std::map<int, int> ids;
  auto id = [&](int b) {
    auto [it, fresh] = ids.emplace(b, int(out.buffers.size()));
    if (fresh) out.buffers.push_back(p.buffers[b]);
    return it->second;
  };
  for (int b : inputs) out.inputs.push_back(id(b));
  for (int s : steps) {
    runtime::Step step = p.steps[s];
    for (size_t k = 0; k < step.inputs.size(); ++k) {
      int& b = step.inputs[k];
      const int factor = scale ? scale(s, k) : 1;
      b = id(b);
      if (factor == 1) continue;
      runtime::BufferDesc scaled = out.buffers[size_t(b)];
      scaled.constant.clear(), scaled.offset = -1;
      out.buffers.push_back(std::move(scaled));
      out.steps.push_back(scaleStep(step, b, int(out.buffers.size()) - 1, factor));
      b = int(out.buffers.size()) - 1;
    }
    for (int& b : step.outputs) b = id(b);
    out.steps.push_back(std::move(step));
  }
  for (int b : outputs) out.outputs.push_back(id(b));
  return out;
}

// How an all-reduce's (or reduce-scatter's) operands fold over a device's micro-batches: a sum's
// and a mean's add (the mean divides once, by every leaf, in the apply part), a max's and a min's
// take the max or min.
runtime::Reduction foldOf(const runtime::Step& step) {
  const runtime::Reduction op = runtime::parseReduction(step.text("reduction"));
  return op == runtime::Reduction::Mean ? runtime::Reduction::Sum : op;
}

// `program` with a copy of each buffer that reductions of different folds read (a loss both
// psum'd and pmax'd), one per further fold, so that each accumulated operand folds one way.
Program oneFoldPerOperand(const Program& program) {
  Program p = program;
  p.steps.clear();
  std::map<int, runtime::Reduction> first;
  std::map<std::pair<int, runtime::Reduction>, int> copies;
  for (runtime::Step step : program.steps) {
    if (step.op == "all_reduce" || step.op == "reduce_scatter") {
      const runtime::Reduction fold = foldOf(step);
      for (int& b : step.inputs) {
        const auto [at, fresh] = first.emplace(b, fold);
        if (fresh || at->second == fold) continue;
        const auto [copy, made] = copies.emplace(std::pair{b, fold}, int(p.buffers.size()));
        if (made) {
          runtime::BufferDesc desc = p.buffers[size_t(b)];
          desc.constant.clear(), desc.offset = -1;
          p.buffers.push_back(std::move(desc));
          p.steps.push_back({"convert", {b}, {copy->second}, {}, step.location, step.layer});  // a copy, of any dtype
        }
        b = copy->second;
      }
    }
    p.steps.push_back(std::move(step));
  }
  return p;
}

// Which buffers hold the same value on every replica of one micro-batch: replicated inputs,
// constants, all-reduced and all-gathered results, and what is computed from those alone.
std::vector<bool> replicatedBuffers(const Program& p, const std::vector<bool>& mappedInputs) {
  std::vector<bool> replicated(p.buffers.size());
  for (size_t b = 0; b < p.buffers.size(); ++b) replicated[b] = !p.buffers[b].constant.empty();
  for (size_t i = 0; i < p.inputs.size(); ++i) replicated[p.inputs[i]] = !mappedInputs[i];
  for (const runtime::Step& step : p.steps) {
    bool r = step.op == "all_reduce" || step.op == "all_gather";
    if (!r && step.op != "axis_index" && step.op != "reduce_scatter")
      r = std::all_of(step.inputs.begin(), step.inputs.end(), [&](int b) { return bool(replicated[b]); });
    for (int b : step.outputs) replicated[b] = r;
  }
  return replicated;
}

// `program` with each of `outputs` (buffers the same on every replica of a micro-batch, but not
// across micro-batches: cross-replica BatchNorm's running statistics) replaced by its mean over
// the virtual replicas, an all-reduce that accumulates like the gradients' pmean.
Program averagedOverMicroBatches(const Program& program, const std::vector<int>& outputs) {
  Program p = program;
  for (int k : outputs) {
    const int from = p.outputs[k], to = int(p.buffers.size());
    p.buffers.push_back(p.buffers[from]);
    runtime::Step mean{"all_reduce", {from}, {to}, {{"axis_name", p.axisName}, {"reduction", std::string("mean")}},
                       "", ""};
    // Where the value came from: its producer's place.
    for (const runtime::Step& step : p.steps)
      if (std::count(step.outputs.begin(), step.outputs.end(), from)) mean.location = step.location, mean.layer = step.layer;
    p.steps.push_back(std::move(mean));
    p.outputs[k] = to;
  }
  return p;
}

}  // namespace

AccumulationSplit splitForAccumulation(const Program& whole, const std::vector<std::string>& outputNames) {
  const Program program = oneFoldPerOperand(whole);
  if (program.inputPlacements.size() != program.inputs.size() || program.outputPlacements.size() != program.outputs.size())
    throw Error("program @" + program.name + " has no call contract to split for accumulation");
  if (!program.mesh.empty())
    throw Error("program @" + program.name + " runs on mesh " + program.mesh.describe() +
                " (spmd::shardMap); gradient accumulation (accumulate > 1) on a mesh is not supported: give the data "
                "axis more replicas, or accumulate in the function (a loop over micro-batches)");
  // Mapped inputs differ between micro-batches; sliced ones (ZeRO-1's and FSDP's parameters and
  // state, cut over the devices) differ between devices only, like the replicated ones not at all.
  std::vector<bool> mappedInputs, mappedOutputs;
  for (const runtime::Placement& p : program.inputPlacements) mappedInputs.push_back(p.kind == runtime::Placement::Kind::Mapped);
  for (const runtime::Placement& p : program.outputPlacements) mappedOutputs.push_back(p.kind != runtime::Placement::Kind::Replicated);
  for (const runtime::Step& step : program.steps) {
    if (step.attrs.count("replica_groups"))
      throw Error(step.op + " within replica groups at " + step.where() + " with gradient accumulation is not "
                  "supported: a group's replicas may run as micro-batches of one device, one after another; use "
                  "accumulate = 1 for a step with collectives within groups (psum, allGather, psumScatter or allToAll with "
                  "AxisGroups)");
    if (step.op == "ppermute" || step.op == "all_to_all")
      throw Error(step.op + " at " + step.where() + " with gradient accumulation is not supported: a micro-batch's "
                  "replicas cannot send to the replicas of another micro-batch, which run at another time; "
                  "use accumulate = 1 for a step that permutes across replicas");
    // A gather or scatter over every replica would span micro-batches that run at other times;
    // the sliced parameters' ones span the devices (program.deviceReplicas()).
    const bool overReplicas = step.op == "all_gather" ? program.buffers[step.outputs[0]].bytes() ==
                                                            program.buffers[step.inputs[0]].bytes() * size_t(program.replicas)
                              : step.op == "reduce_scatter" && program.buffers[step.inputs[0]].shape[0] == program.replicas;
    if (overReplicas && program.deviceReplicas() != program.replicas)
      throw Error(step.op + " at " + step.where() + " over all " + std::to_string(program.replicas) +
                  " replicas with gradient accumulation is not supported: the micro-batches' replicas run one after "
                  "another on each device, not at once; use accumulate = 1 for a step that gathers or scatters across "
                  "replicas");
  }
  const int steps = int(program.steps.size()), buffers = int(program.buffers.size());
  // The all-reduces, and the reduce-scatters of the sliced parameters' gradients, sum over the
  // micro-batches too: their operands are accumulated, and they run once in the apply part.
  auto accumulates = [&](int s) { return program.steps[s].op == "all_reduce" || program.steps[s].op == "reduce_scatter"; };
  std::vector<bool> accumulated(steps);
  for (int s = 0; s < steps; ++s) accumulated[s] = accumulates(s);
  std::vector<bool> varying, stepVarying;
  // To a fixed point: an accumulated all-reduce's result is replicated; one whose result
  // feeds varying work is demoted to the micro part.
  for (bool changed = true; changed;) {
    changed = false;
    varying.assign(buffers, false);
    stepVarying.assign(steps, false);
    for (size_t i = 0; i < program.inputs.size(); ++i)
      if (mappedInputs[i]) varying[program.inputs[i]] = true;
    for (int s = 0; s < steps; ++s) {
      const runtime::Step& step = program.steps[s];
      bool v = step.op == "axis_index" && !step.flag("of_device");  // a device's index is one per device
      for (int b : step.inputs) v = v || varying[b];
      if (accumulated[s]) continue;  // its result is replicated
      stepVarying[s] = v;
      for (int b : step.outputs) varying[b] = varying[b] || v;
    }
    // The accumulated all-reduces each buffer was computed from through replicated work (a
    // scale of the reduced sums, say): varying work that reads one needs them per micro-batch.
    std::vector<std::set<int>> from(buffers);
    for (int s = 0; s < steps; ++s) {
      const runtime::Step& step = program.steps[s];
      if (accumulated[s]) {
        for (int b : step.outputs) from[b] = {s};
        continue;
      }
      if (stepVarying[s]) {
        for (int b : step.inputs)
          for (int t : from[b]) accumulated[t] = false, changed = true;
        continue;
      }
      for (int b : step.inputs)
        for (int t : from[b])
          for (int o : step.outputs) from[o].insert(t);
    }
  }
  auto readsVarying = [&](const runtime::Step& step) {
    return std::any_of(step.inputs.begin(), step.inputs.end(), [&](int b) { return bool(varying[b]); });
  };
  // An all-reduce of values that do not vary has nothing to accumulate: an ordinary step (decided
  // at the end, since its operands may come to vary as other all-reduces are demoted).
  for (int s = 0; s < steps; ++s)
    if (accumulated[s] && !readsVarying(program.steps[s])) accumulated[s] = false;
  // An all-reduce operand that does not vary with the batch (a parameter's pmean, a psum of
  // ones, a norm of the reduced gradients) is the same on each of a device's A micro-batches: in
  // the fold over the virtual replicas it stands for A equal leaves, whose subtree (a power of
  // two of equal values added pairwise) is exactly A times it. So it is never accumulated: the
  // part that reduces it reads it as it is, times A where the reduction adds: a sum, and in the
  // apply part, whose communicator divides a mean by every leaf, a mean (the micro part's divides
  // by its replicas: the quotient's exact value, hence its bits, are the larger layout's).
  const int64_t A = program.microBatches;
  auto scaleFor = [&](bool apply) {
    return [&, apply](int s, size_t k) {
      const runtime::Step& step = program.steps[size_t(s)];
      const int b = step.inputs[k];
      if ((step.op != "all_reduce" && step.op != "reduce_scatter") || varying[size_t(b)] || A == 1) return 1;
      const runtime::Reduction op = runtime::parseReduction(step.text("reduction"));
      if (op != runtime::Reduction::Sum && !(apply && op == runtime::Reduction::Mean)) return 1;
      const DType dtype = program.buffers[size_t(b)].dtype;
      if (dtype != DType::f32 && dtype != DType::f64)
        throw Error(step.op + " (" + runtime::reductionName(op) + ") at " + step.where() + " reduces a value of dtype " +
                    std::string(dtypeName(dtype)) + " that is the same on every micro-batch; with gradient accumulation "
                    "it counts once per micro-batch (multiplied by " + std::to_string(A) + "), which is done for f32 and f64 "
                    "values only: cast it to f32 first, or use accumulate = 1");
      return int(A);
    };
  };
  // With sliced parameters (ZeRO-1, FSDP) an all-reduce inside the micro-batches (cross-replica
  // BatchNorm's statistics) makes the replicated step average per-micro-batch updates, which a
  // sharded update cannot reproduce bit for bit: refused rather than silently different.
  const auto sliced = [](const runtime::Placement& p) { return p.kind == runtime::Placement::Kind::Sliced; };
  if (std::any_of(program.inputPlacements.begin(), program.inputPlacements.end(), sliced))
    for (int s = 0; s < steps; ++s)
      if (program.steps[s].op == "all_reduce" && !accumulated[s] && readsVarying(program.steps[s]))
        throw Error("all_reduce at " + program.steps[s].where() + " reduces within each micro-batch (cross-replica "
                    "BatchNorm's statistics, say), so with gradient accumulation the replicated step averages the "
                    "micro-batches' updates, which shardUpdate / fullyShard cannot give bit for bit; use per-replica "
                    "BatchNorm, accumulate = 1, or no sharding for this step");
  // A reduce-scatter runs over the devices, so only once per step, on the accumulated sums.
  for (int s = 0; s < steps; ++s)
    if (program.steps[s].op == "reduce_scatter" && !accumulated[s])
      throw Error("reduce_scatter at " + program.steps[s].where() + " (a sliced gradient, shardUpdate / fullyShard) " +
                  (readsVarying(program.steps[s]) ? "feeds work that differs between micro-batches"
                                                  : "reduces a value that does not vary with the batch") +
                  ", so gradient accumulation cannot run it once per step; use accumulate = 1 with this step");

  AccumulationSplit split;
  // Outputs: mapped varying ones from the micro part, the rest from the apply part.
  std::vector<int> microOutputs, applyOutputs, accumulatedOperands;
  // A replicated output that differs between micro-batches though not between the replicas of one
  // (it came through an all-reduce inside the micro part: cross-replica BatchNorm's running
  // statistics) is averaged over the micro-batches; one that differs between replicas is an error.
  std::vector<int> perMicroBatch;
  const std::vector<bool> replicated = replicatedBuffers(program, mappedInputs);
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    int b = program.outputs[k];
    if (!varying[b] || mappedOutputs[k]) continue;
    if (!replicated[b])
      throw Error("output '" + outputNames[k] + "' varies with the batch but is not reduced over the axis (no pmean "
                  "or psum reaches it), so with gradient accumulation it would have a value per micro-batch; "
                  "reduce it (spmd::pmean) or return it mapped (outAxes 0 or spmd::split)");
    perMicroBatch.push_back(int(k));
  }
  if (!perMicroBatch.empty())
    return splitForAccumulation(averagedOverMicroBatches(program, perMicroBatch), outputNames);
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    int b = program.outputs[k];
    if (varying[b] && program.outputPlacements[k].kind == runtime::Placement::Kind::Sliced)
      throw Error("output '" + outputNames[k] + "' is sliced (shardUpdate / fullyShard), but with gradient accumulation "
                  "it differs between micro-batches: its update reads a value reduced over one micro-batch's replicas "
                  "only (cross-replica BatchNorm's statistics, or a gradient norm computed from them); use "
                  "accumulate = 1, per-replica BatchNorm, or no sharding for this step");
    if (varying[b]) split.outputs.push_back({true, int(microOutputs.size())}), microOutputs.push_back(b);
    else split.outputs.push_back({false, int(applyOutputs.size())}), applyOutputs.push_back(b);
  }
  split.microMapped = int(microOutputs.size());
  for (int s = 0; s < steps; ++s)
    if (accumulated[s])
      for (int b : program.steps[s].inputs)
        if (varying[b] && !std::count(accumulatedOperands.begin(), accumulatedOperands.end(), b))
          accumulatedOperands.push_back(b), split.folds.push_back(foldOf(program.steps[s]));  // one fold each
  split.accumulated = int(accumulatedOperands.size());
  for (int b : accumulatedOperands) microOutputs.push_back(b);

  // The micro part: varying steps and whatever they and the micro outputs need (backwards).
  std::vector<bool> inMicro(steps), neededMicro(buffers);
  for (int b : microOutputs) neededMicro[b] = true;
  for (int s = steps - 1; s >= 0; --s) {
    if (accumulated[s]) continue;
    bool in = stepVarying[s];
    for (int b : program.steps[s].outputs) in = in || neededMicro[b];
    if (!in) continue;
    inMicro[s] = true;
    for (int b : program.steps[s].inputs) neededMicro[b] = true;
  }
  // The apply part: the accumulated all-reduces and whatever the apply outputs need.
  std::vector<bool> inApply(steps), neededApply(buffers);
  for (int b : applyOutputs) neededApply[b] = true;
  std::vector<bool> accumulatedOperand(buffers);
  for (int b : accumulatedOperands) accumulatedOperand[b] = true;
  for (int s = steps - 1; s >= 0; --s) {
    bool in = accumulated[s];
    for (int b : program.steps[s].outputs) in = in || neededApply[b];
    if (!in) continue;
    inApply[s] = true;
    if (stepVarying[s])
      throw Error("step " + program.steps[s].op + " at " + program.steps[s].where() +
                  " varies with the batch but feeds a replicated output through no all-reduce; gradient "
                  "accumulation cannot split this step");
    for (int b : program.steps[s].inputs)
      if (!accumulated[s] || !varying[b]) neededApply[b] = true;
  }
  std::vector<int> microSteps, applySteps, microIn, applyIn;
  for (int s = 0; s < steps; ++s) {
    if (inMicro[s]) microSteps.push_back(s);
    if (inApply[s]) applySteps.push_back(s);
  }
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    int b = program.inputs[i];
    if (neededMicro[b]) split.microInputs.push_back(int(i)), microIn.push_back(b);
  }
  applyIn = accumulatedOperands;
  split.applyInputs.assign(accumulatedOperands.size(), -1);
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    int b = program.inputs[i];
    if (neededApply[b] && !accumulatedOperand[b]) split.applyInputs.push_back(int(i)), applyIn.push_back(b);
  }
  // Donation's pairs carried into the apply part, so that its steps compute a donated output in
  // the donor's buffers (runtime::inPlaceOutputs) instead of a copy after them: a donor the apply
  // part does not read (the BatchNorm statistics' input, read per micro-batch only) becomes an
  // input it does not read either. A mapped donor holds every micro-batch's rows: not paired.
  std::vector<int> applyDonors(applyOutputs.size(), -1);
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const int donor = program.outputDonors.empty() ? -1 : program.outputDonors[k];
    if (split.outputs[k].micro || donor < 0 || program.inputPlacements[size_t(donor)].kind == runtime::Placement::Kind::Mapped)
      continue;
    auto at = std::find(split.applyInputs.begin(), split.applyInputs.end(), donor);
    if (at == split.applyInputs.end()) {
      split.applyInputs.push_back(donor), applyIn.push_back(program.inputs[size_t(donor)]);
      at = split.applyInputs.end() - 1;
    }
    applyDonors[size_t(split.outputs[k].index)] = int(at - split.applyInputs.begin());
  }
  for (int s : microSteps) {
    const runtime::Step& step = program.steps[size_t(s)];
    if (step.op == "all_reduce" && readsVarying(step) &&
        !std::count(split.withinMicroBatch.begin(), split.withinMicroBatch.end(), step.where()))
      split.withinMicroBatch.push_back(step.where());
  }
  split.micro = extract(program, microSteps, microIn, microOutputs, scaleFor(false));
  split.apply = extract(program, applySteps, applyIn, applyOutputs, scaleFor(true));
  // Each accumulated operand the micro part computes (not an input it passes through) is paired
  // with an input of its own bytes that no step reads: the caller passes the fold's leaf there
  // and the operand's step writes it in place (runtime::inPlaceOutputs), with no copy out of
  // the arena and no bytes in it.
  std::vector<int> microDonors(split.micro.outputs.size(), -1);
  for (int j = 0; j < split.accumulated; ++j) {
    const int output = split.micro.outputs[size_t(split.microMapped + j)];
    if (std::count(split.micro.inputs.begin(), split.micro.inputs.end(), output)) continue;
    split.micro.buffers.push_back(split.micro.buffers[size_t(output)]);
    split.micro.inputs.push_back(int(split.micro.buffers.size()) - 1);
    microDonors[size_t(split.microMapped + j)] = int(split.micro.inputs.size()) - 1;
  }
  if (std::any_of(applyDonors.begin(), applyDonors.end(), [](int d) { return d >= 0; }))
    split.apply.outputDonors = applyDonors;
  if (std::any_of(microDonors.begin(), microDonors.end(), [](int d) { return d >= 0; })) split.micro.outputDonors = microDonors;
  split.micro.name = program.name + ".micro";
  split.apply.name = program.name + ".apply";
  // The micro part runs one micro-batch on every device at once: its all-reduces (cross-replica
  // BatchNorm's) and gathers span the devices.
  split.micro.replicas = program.deviceReplicas();
  split.micro.microBatches = 1;
  split.inputPlacements = program.inputPlacements;
  split.outputPlacements = program.outputPlacements;
  split.outputDonors = program.outputDonors;
  for (int b : program.inputs) split.inputTypes.push_back({program.buffers[b].dtype, program.buffers[b].shape});
  for (int b : program.outputs) split.outputTypes.push_back({program.buffers[b].dtype, program.buffers[b].shape});
  return split;
}

}  // namespace spmd
