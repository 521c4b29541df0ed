// callAccumulated: the micro-batch loop, the fold of each accumulated operand, the apply part.
#include "runtime/exec/AccumulatedCall.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/device/Device.h"
#include "runtime/device/Fold.h"
#include "runtime/device/Kernel.h"

namespace spmd::runtime {
namespace {

// Folds `from` into `to` elementwise with `op` (a node of the fold tree: Sum, Max or Min): on the
// host where the device's memory is the host's, else with the device's own add, max or min kernel
// on its stream (one rounding in the element type either way, and NaN as the all-reduce's, so the
// same bits). The device kernels take f32 and f64: other leaves (an i32 count of correct
// predictions) come to the host, are folded there and go back.
void foldInto(Device& device, Reduction op, DType dtype, std::byte* to, const std::byte* from, int64_t count) {
  auto onHost = [&](std::byte* into, const std::byte* other) {
    const void* sources[] = {into, other};
    void* out[] = {into};
    FoldPlan::leaves(2).run(dtype, sources, 0, count, op, 1, out);
  };
  if (device.hostAccessible()) return onHost(to, from);
  if (dtype != DType::f32 && dtype != DType::f64) {
    const size_t bytes = size_t(count) * dtypeSize(dtype);
    std::vector<std::byte> into(bytes), other(bytes);
    device.copyToHost(into.data(), to, bytes);  // after the stream's work: the leaves are written
    device.copyToHost(other.data(), from, bytes);
    onHost(into.data(), other.data());
    device.copyToDevice(to, into.data(), bytes);  // staged before it returns
    return;
  }
  auto foldStep = [](const char* name) {
    Step s;
    s.op = name;
    s.location = "the fold of accumulated micro-batches";
    return s;
  };
  static const Step add = foldStep("add"), max = foldStep("max"), min = foldStep("min");
  const Step& step = op == Reduction::Max ? max : op == Reduction::Min ? min : add;
  const int64_t shape[] = {count};
  const TensorView in[] = {{to, dtype, shape}, {const_cast<std::byte*>(from), dtype, shape}};
  const TensorView out[] = {{to, dtype, shape}};
  std::shared_ptr<void> cache;
  KernelCall call{step, in, out, cache, nullptr, &device};
  device.kernels().at(step.op)(call);
}

// Copies `bytes` from `from` to `to`, both the device's memory.
void copyWithin(Device& device, std::byte* to, const std::byte* from, size_t bytes) {
  if (device.hostAccessible()) std::memcpy(to, from, bytes);
  else device.copyOnDevice(to, from, bytes);
}

// One complete subtree of the fold tree over the micro-batches so far.
struct Subtree {
  int level;
  std::shared_ptr<std::byte> data;
};

}  // namespace

std::vector<std::shared_ptr<DeviceArray>> callAccumulated(const AccumulationSplit& split, int microBatches,
                                                          const std::vector<ReplicaGroup*>& micro, ReplicaGroup& apply,
                                                          const std::vector<CallArgument>& arguments,
                                                          const CallLayout& layout, CallCounts* counts,
                                                          FoldBuffers* kept) {
  if (micro.empty()) throw Error("program @" + split.micro.name + ": callAccumulated was given no group to run it");
  const int devices = micro.front()->size(), A = microBatches;
  FoldBuffers ownFold;
  FoldBuffers& fold = kept ? *kept : ownFold;
  fold.spare.resize(size_t(devices));
  for (auto& operands : fold.spare) operands.resize(size_t(split.accumulated));
  // A leaf for operand j of replica r: a kept buffer, else a new one.
  auto leafFor = [&](int r, int j) {
    auto& spare = fold.spare[size_t(r)][size_t(j)];
    if (spare.empty())
      return micro.front()->device(r)->allocate(split.micro.buffers[size_t(split.micro.outputs[size_t(split.microMapped + j)])].bytes());
    std::shared_ptr<std::byte> leaf = std::move(spare.back());
    spare.pop_back();
    return leaf;
  };
  if (arguments.size() != split.inputTypes.size())
    throw Error("program @" + split.micro.name + " takes " + std::to_string(split.inputTypes.size()) +
                " arguments, not " + std::to_string(arguments.size()));
  // A mapped input or output holds all A micro-batches' rows; a sliced one (ZeRO-1's and FSDP's
  // parameters and state) is the device's slice, which every micro-batch reads whole.
  auto mapped = [](const Placement& p) { return p.kind == Placement::Kind::Mapped; };
  // One replica's shapes.
  std::vector<Shape> local;
  for (size_t i = 0; i < split.inputTypes.size(); ++i) {
    local.push_back(split.inputTypes[i].shape);
    if (mapped(split.inputPlacements[i])) local.back()[0] *= A;
  }
  std::vector<bool> bound;
  std::vector<std::vector<Input>> inputs = bindArguments(arguments, split.inputPlacements, local, MeshShape{}, *micro.front(), bound);

  // Per replica and accumulated operand, the fold tree's stack of complete subtrees (level, buffer).
  const Program& microPart = split.micro;
  std::vector<std::vector<std::vector<Subtree>>> stacks(devices, std::vector<std::vector<Subtree>>(split.accumulated));
  // Mapped outputs: each replica's full local part, filled a micro-batch at a time.
  std::vector<std::vector<std::shared_ptr<std::byte>>> parts(devices);
  for (int r = 0; r < devices; ++r)
    for (int k = 0; k < split.microMapped; ++k)
      parts[r].push_back(micro.front()->device(r)->allocate(microPart.buffers[microPart.outputs[k]].bytes() * A));
  // Micro-batch a's inputs and outputs on every replica: its rows of the mapped inputs, the
  // others whole, and new leaves of the fold, which the operands' steps write in place where
  // intoLeaf says (the others are copied there).
  auto prepare = [&](int a, std::vector<std::vector<Input>>& in, std::vector<std::vector<Output>>& out) {
    in.assign(size_t(devices), {});
    out.assign(size_t(devices), {});
    for (int r = 0; r < devices; ++r) {
      for (int i : split.microInputs) {
        Input input = inputs[r][i];
        if (mapped(split.inputPlacements[i])) {  // micro-batch a of this replica's rows
          const BufferDesc& part = split.inputTypes[i];
          const size_t bytes = part.bytes();
          if (input.device) input.device = std::shared_ptr<std::byte>(input.device, input.device.get() + a * bytes);
          else input.host = Array::view(input.host, a * bytes, part.shape);
        }
        in[r].push_back(input);
      }
      out[r].assign(microPart.outputs.size(), Output{Array{}, true, nullptr});
      for (int j = 0; j < split.accumulated; ++j) {
        std::shared_ptr<std::byte> leaf = leafFor(r, j);
        if (intoLeaf(split, j)) in[r].push_back({Array{}, leaf});
        out[r][size_t(split.microMapped + j)].device = std::move(leaf);
      }
    }
  };
  // Micro-batch a's results: its rows of the mapped outputs, and its leaves into the fold.
  auto gather = [&](int a, std::vector<std::vector<Output>>& out) {
    for (int r = 0; r < devices; ++r) {
      Device& device = *micro.front()->device(r);
      device.activate();
      for (int k = 0; k < split.microMapped; ++k) {
        const size_t bytes = microPart.buffers[microPart.outputs[k]].bytes();
        copyWithin(device, parts[r][k].get() + a * bytes, out[r][k].device.get(), bytes);
      }
      for (int j = 0; j < split.accumulated; ++j) {
        const BufferDesc& b = microPart.buffers[microPart.outputs[split.microMapped + j]];
        auto& stack = stacks[r][j];
        Subtree leaf{0, out[r][split.microMapped + j].device};
        // Merge while the newest subtree is the right sibling of the one below it.
        while (!stack.empty() && stack.back().level == leaf.level) {
          foldInto(device, split.folds[size_t(j)], b.dtype, stack.back().data.get(), leaf.data.get(), numElements(b.shape));
          fold.spare[size_t(r)][size_t(j)].push_back(std::move(leaf.data));  // added in: free again
          leaf = {stack.back().level + 1, stack.back().data};
          stack.pop_back();
        }
        stack.push_back(leaf);
      }
      // A leaf added in is written again by a later micro-batch, maybe on another group's stream.
      device.synchronize();
    }
  };
  // Rounds of `atOnce` micro-batches, one per group, each on its own thread; their leaves join
  // the fold in micro-batch order, so the fold's bits do not depend on the rounds. The first call
  // runs them one at a time, micro-batch a on group a mod groups, so that each group's first run
  // (its kernels choose; across processes process 0's choices arrive) runs alone and in the same
  // order in every process: timing a kernel beside other work would mislead.
  const int groups = int(micro.size()), atOnce = fold.warmed ? std::min(groups, A) : 1;
  // Group g runs micro-batch steps[g] of A (-1: none this round).
  auto virtualSteps = [&](const std::vector<int>& steps) {
    for (int g = 0; g < groups; ++g)
      micro[size_t(g)]->setVirtualStep(steps[size_t(g)] < 0 ? 0 : steps[size_t(g)], steps[size_t(g)] < 0 ? 1 : A);
  };
  const std::vector<int> idle(size_t(groups), -1);
  for (int first = 0; first < A; first += atOnce) {
    const int n = std::min(atOnce, A - first), firstGroup = fold.warmed ? 0 : first % groups;
    std::vector<std::vector<std::vector<Input>>> in(static_cast<size_t>(n));
    std::vector<std::vector<std::vector<Output>>> out(static_cast<size_t>(n));
    std::vector<int> steps = idle;
    for (int g = 0; g < n; ++g) {
      prepare(first + g, in[size_t(g)], out[size_t(g)]);
      steps[size_t(firstGroup + g)] = first + g;
    }
    virtualSteps(steps);
    std::vector<std::exception_ptr> failed(static_cast<size_t>(n));
    auto runOne = [&](int g) {
      try {
        micro[size_t(firstGroup + g)]->run(in[size_t(g)], out[size_t(g)]);
      } catch (...) {
        failed[size_t(g)] = std::current_exception();
      }
    };
    std::vector<std::thread> others;
    for (int g = 1; g < n; ++g) {
      try {
        others.emplace_back(runOne, g);
      } catch (const std::system_error&) {  // no thread to be had: it runs here, before the first
        runOne(g);
      }
    }
    runOne(0);
    for (std::thread& t : others) t.join();
    for (const std::exception_ptr& e : failed)
      if (e) {
        virtualSteps(idle);
        std::rethrow_exception(e);
      }
    for (int g = 0; g < n; ++g) gather(first + g, out[size_t(g)]);
  }
  virtualSteps(idle);
  fold.warmed = true;

  // The apply part: the replicas' subtrees (one each: A is a power of two), then the inputs it
  // reads or only writes. An output it computes takes the buffers of the input the whole step's
  // contract pairs with it, when that input was donated and bound in place; its steps write it
  // there where the apply part's own pairs (split.apply.outputDonors) allow.
  std::vector<std::vector<Input>> in(devices);
  for (int r = 0; r < devices; ++r) {
    for (int j = 0; j < split.accumulated; ++j) in[r].push_back({Array{}, stacks[r][j].front().data});
    for (size_t i = split.accumulated; i < split.applyInputs.size(); ++i) in[r].push_back(inputs[r][split.applyInputs[i]]);
  }
  std::vector<int> donorOf(split.apply.outputs.size(), -1);
  std::vector<bool> donors(arguments.size());
  for (size_t k = 0; k < split.outputs.size(); ++k) {
    const int i = split.outputDonors[k];
    if (split.outputs[k].micro || i < 0 || !arguments[size_t(i)].donated || !bound[size_t(i)] ||
        mapped(split.inputPlacements[size_t(i)]) || layout.perReplicaOutputs)
      continue;
    donorOf[size_t(split.outputs[k].index)] = i;
    donors[size_t(i)] = true;
  }
  std::vector<std::vector<Output>> out(devices);
  for (int r = 0; r < devices; ++r)
    for (size_t k = 0; k < split.apply.outputs.size(); ++k)
      out[r].push_back({Array{}, true, donorOf[k] >= 0 ? inputs[r][size_t(donorOf[k])].device : nullptr});
  runDonating(apply, in, out, arguments, donors, layout.who, counts);
  for (int r = 0; r < devices; ++r)  // the folded subtrees, read by the apply part: free again
    for (int j = 0; j < split.accumulated; ++j) fold.spare[size_t(r)][size_t(j)].push_back(stacks[r][j].front().data);
  if (counts) counts->argumentsInPlace = std::count(bound.begin(), bound.end(), true);

  std::vector<std::shared_ptr<DeviceArray>> results;
  for (size_t k = 0; k < split.outputs.size(); ++k) {
    std::vector<std::shared_ptr<std::byte>> buffers;
    const AccumulationSplit::Source& from = split.outputs[k];
    for (int r = 0; r < devices; ++r) buffers.push_back(from.micro ? parts[r][from.index] : out[r][from.index].device);
    Shape shape = split.outputTypes[k].shape;
    if (from.micro && !shape.empty()) shape[0] *= A;
    results.push_back(assembleOutput(split.outputTypes[k].dtype, shape, split.outputPlacements[k],
                                     k < layout.stacked.size() && layout.stacked[k], layout.perReplicaOutputs,
                                     MeshShape{}, apply, std::move(buffers)));
  }
  return results;
}

}  // namespace spmd::runtime
