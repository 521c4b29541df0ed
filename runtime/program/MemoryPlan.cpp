// Lifetimes from the step order, and the memory-plan check (sweep over offsets).
#include "runtime/program/MemoryPlan.h"

#include <algorithm>
#include <bit>

namespace spmd::runtime {

std::vector<Lifetime> lifetimes(const Program& program) {
  const int end = static_cast<int>(program.steps.size());
  std::vector<Lifetime> life(program.buffers.size(), Lifetime{-1, -1});
  std::vector<bool> defined(program.buffers.size(), false);
  for (int id : program.inputs) defined[id] = true;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (!program.buffers[id].constant.empty()) defined[id] = true;
  for (int s = 0; s < end; ++s) {
    const Step& step = program.steps[s];
    for (int id : step.inputs) life[id].last = std::max(life[id].last, s);
    for (int id : step.outputs)
      if (!defined[id]) {
        defined[id] = true;
        life[id] = {s, std::max(life[id].last, s)};
      }
  }
  for (int id : program.outputs) life[id].last = end;
  return life;
}

std::vector<int> reshapeRoots(const Program& program) {
  const size_t count = program.buffers.size();
  std::vector<int> root(count), writers(count, 0);
  std::vector<bool> fixed(count, false);
  for (size_t id = 0; id < count; ++id) {
    root[id] = int(id);
    fixed[id] = !program.buffers[id].constant.empty();
  }
  for (int id : program.inputs) fixed[size_t(id)] = true;
  for (const Step& step : program.steps)
    for (int id : step.outputs) ++writers[size_t(id)];
  for (const Step& step : program.steps) {
    if (step.op != "reshape" || step.inputs.size() != 1 || step.outputs.size() != 1) continue;
    const int in = step.inputs[0], out = step.outputs[0];
    const BufferDesc &a = program.buffers[size_t(in)], &b = program.buffers[size_t(out)];
    if (in == out || fixed[size_t(in)] || fixed[size_t(out)] || writers[size_t(in)] != 1 ||
        writers[size_t(out)] != 1 || !a.layout.empty() || !b.layout.empty() || a.bytes() != b.bytes())
      continue;
    root[size_t(out)] = root[size_t(in)];
  }
  return root;
}

std::vector<Lifetime> chainLifetimes(std::vector<Lifetime> life, const std::vector<int>& root) {
  for (size_t id = 0; id < life.size(); ++id)
    if (root[id] != int(id)) {
      Lifetime& chain = life[size_t(root[id])];
      chain = {std::min(chain.first, life[id].first), std::max(chain.last, life[id].last)};
    }
  return life;
}

std::vector<bool> inPlaceOutputs(const Program& program) {
  const size_t count = program.buffers.size();
  std::vector<bool> inPlace(program.outputs.size(), false);
  if (program.outputDonors.size() != program.outputs.size()) return inPlace;
  std::vector<int> writer(count, -1), writers(count, 0), returned(count, 0), lastRead(count, -1);
  for (int s = 0; s < int(program.steps.size()); ++s) {
    for (int id : program.steps[size_t(s)].outputs) writer[size_t(id)] = s, ++writers[size_t(id)];
    for (int id : program.steps[size_t(s)].inputs) lastRead[size_t(id)] = s;
  }
  for (int id : program.outputs) ++returned[size_t(id)];
  // Reshape chains share their root's bytes: an output in one is not its own memory.
  const std::vector<int> root = reshapeRoots(program);
  std::vector<bool> chained(count, false);
  for (size_t id = 0; id < count; ++id)
    if (root[id] != int(id)) chained[id] = chained[size_t(root[id])] = true;
  for (size_t k = 0; k < program.outputs.size(); ++k) {
    const int donor = program.outputDonors[k];
    if (donor < 0 || donor >= int(program.inputs.size())) continue;
    const int from = program.inputs[size_t(donor)], to = program.outputs[k];
    const BufferDesc &a = program.buffers[size_t(from)], &b = program.buffers[size_t(to)];
    const int w = writer[size_t(to)];
    // w < 0: nothing writes it (an input passed through, a constant).
    if (w < 0 || writers[size_t(to)] != 1 || returned[size_t(to)] != 1 || returned[size_t(from)] != 0 ||
        chained[size_t(to)] || a.bytes() != b.bytes() || lastRead[size_t(from)] > w)
      continue;
    if (lastRead[size_t(from)] == w) {
      const Step& step = program.steps[size_t(w)];
      const int64_t segments = segmentsOf(step);
      if (step.op != "fused" || a.layout != b.layout || segments < 1 || step.inputs.size() % size_t(segments) ||
          step.outputs.size() % size_t(segments))
        continue;
      const size_t ni = step.inputs.size() / size_t(segments), no = step.outputs.size() / size_t(segments);
      const size_t segment = size_t(std::find(step.outputs.begin(), step.outputs.end(), to) - step.outputs.begin()) / no;
      bool elsewhere = false;  // the donor read by another segment, which may run before or beside this one
      for (size_t j = 0; j < step.inputs.size(); ++j)
        if (step.inputs[j] == from && j / ni != segment) elsewhere = true;
      if (elsewhere) continue;
    }
    inPlace[k] = true;
  }
  return inPlace;
}

std::vector<bool> unplannedInPlace(const Program& program) {
  std::vector<bool> unplanned(program.buffers.size(), false);
  const std::vector<bool> inPlace = inPlaceOutputs(program);
  for (size_t k = 0; k < inPlace.size(); ++k)
    if (inPlace[k] && program.buffers[size_t(program.outputs[k])].offset < 0) unplanned[size_t(program.outputs[k])] = true;
  return unplanned;
}

size_t residentBytes(const Program& program, bool hostAccessible) {
  std::vector<bool> isInput(program.buffers.size());
  for (int id : program.inputs) isInput[id] = true;
  const std::vector<bool> donorsBytes = unplannedInPlace(program);
  size_t bytes = program.arenaBytes;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (program.buffers[id].offset < 0 && !(isInput[id] && hostAccessible) && !donorsBytes[id])
      bytes += program.buffers[id].bytes();
  return bytes;
}

size_t residentBytes(const AccumulationSplit& split, int microBatches, bool hostAccessible, int atOnce) {
  atOnce = std::clamp(atOnce, 1, std::max(1, microBatches));
  size_t bytes = residentBytes(split.micro, true) * size_t(atOnce) + residentBytes(split.apply, true);
  if (!hostAccessible)
    for (size_t i = 0; i < split.inputTypes.size(); ++i)
      bytes += split.inputTypes[i].bytes() *
               size_t(split.inputPlacements[i].kind == Placement::Kind::Mapped ? microBatches : 1);
  // A round's new leaves beside one complete subtree per bit of the micro-batches before it.
  int levels = 0;
  for (int first = 0; first < microBatches; first += atOnce)
    levels = std::max(levels, std::popcount(unsigned(first)) + std::min(atOnce, microBatches - first));
  for (size_t k = 0; k < split.micro.outputs.size(); ++k) {
    const size_t one = split.micro.buffers[size_t(split.micro.outputs[k])].bytes();
    bytes += one * size_t(int(k) < split.microMapped ? microBatches + atOnce : levels);
  }
  return bytes;
}

PeakLive peakLive(const Program& program) {
  // A reshape chain is one value in memory: its root stands for it, live while any of it is.
  const std::vector<int> root = reshapeRoots(program);
  const std::vector<Lifetime> span = chainLifetimes(lifetimes(program), root);
  std::vector<bool> always(program.buffers.size(), false);
  for (int id : program.inputs) always[id] = true;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (!program.buffers[id].constant.empty()) always[id] = true;
  const std::vector<bool> donorsBytes = unplannedInPlace(program);  // their bytes are their donors'
  auto live = [&](size_t id, int s) {
    return root[id] == int(id) && !donorsBytes[id] && (always[id] || (span[id].first <= s && s <= span[id].last));
  };
  PeakLive peak;
  for (int s = 0; s < int(program.steps.size()); ++s) {
    size_t bytes = 0;
    for (size_t id = 0; id < program.buffers.size(); ++id)
      if (live(id, s)) bytes += program.buffers[id].bytes();
    if (peak.step < 0 || bytes > peak.bytes) peak.step = s, peak.bytes = bytes;
  }
  if (peak.step < 0) return peak;
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (live(id, peak.step)) peak.buffers.push_back(int(id));
  std::stable_sort(peak.buffers.begin(), peak.buffers.end(),
                   [&](int a, int b) { return program.buffers[a].bytes() > program.buffers[b].bytes(); });
  return peak;
}

void checkMemoryPlan(const Program& program) {
  std::vector<Lifetime> life = lifetimes(program);
  const std::vector<int> root = reshapeRoots(program);
  std::vector<bool> fixed(program.buffers.size(), false);
  for (int id : program.inputs) fixed[id] = true;
  std::vector<int> planned;
  auto where = [&](int id) {
    const BufferDesc& b = program.buffers[id];
    return "buffer %" + std::to_string(id) + " (" + std::string(dtypeName(b.dtype)) +
           shapeString(b.shape) + " at arena offset " + std::to_string(b.offset) + ")";
  };
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    const BufferDesc& b = program.buffers[id];
    if (b.offset < 0) continue;
    if (fixed[id] || !b.constant.empty())
      throw Error("program @" + program.name + ": " + where(id) +
                  " is an input or constant and cannot live in the arena");
    if (b.offset % kArenaAlignment || b.offset + b.bytes() > program.arenaBytes)
      throw Error("program @" + program.name + ": " + where(id) + " is misaligned or outside the " +
                  std::to_string(program.arenaBytes) + "-byte arena");
    planned.push_back(static_cast<int>(id));
  }
  // Sweep by start offset; every buffer still open in memory must be dead while this one lives.
  std::sort(planned.begin(), planned.end(),
            [&](int a, int b) { return program.buffers[a].offset < program.buffers[b].offset; });
  std::vector<int> open;
  for (int id : planned) {
    int64_t start = program.buffers[id].offset;
    std::erase_if(open, [&](int o) {
      return program.buffers[o].offset + int64_t(program.buffers[o].bytes()) <= start;
    });
    for (int o : open)  // an empty buffer (a zero extent) holds no byte to overlap
      if (program.buffers[id].bytes() > 0 && life[o].overlaps(life[id]) &&
          !(root[size_t(o)] == root[size_t(id)] && program.buffers[o].offset == start))
        throw Error("program @" + program.name + ": memory plan puts " + where(id) + " over " +
                    where(o) + " while both are live (steps " + std::to_string(life[id].first) +
                    ".." + std::to_string(life[id].last) + " and " + std::to_string(life[o].first) +
                    ".." + std::to_string(life[o].last) + ")");
    if (program.buffers[id].bytes() > 0) open.push_back(id);
  }
}

}  // namespace spmd::runtime
