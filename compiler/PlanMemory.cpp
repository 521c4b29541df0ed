// planMemory: greedy-by-size offset assignment over step lifetimes (as TFLite's arena planner),
// a reshape's result on its input's bytes where runtime::reshapeRoots allows it.
#include "compiler/PlanMemory.h"

#include <algorithm>
#include <numeric>

#include "runtime/program/MemoryPlan.h"

namespace spmd {

void planMemory(runtime::Program& program) {
  using runtime::kArenaAlignment;
  // A reshape chain (runtime::reshapeRoots) is placed as one buffer, its root, live while any
  // of it is: its reshapes then copy nothing.
  const std::vector<int> root = runtime::reshapeRoots(program);
  const std::vector<runtime::Lifetime> life = runtime::chainLifetimes(runtime::lifetimes(program), root);
  std::vector<bool> fixed(program.buffers.size(), false);
  for (int id : program.inputs) fixed[id] = true;
  // An output its donor's buffers hold when the caller donates (runtime::inPlaceOutputs) gets
  // none in the arena; the executor allocates it only for a call that does not donate.
  const std::vector<bool> inPlace = runtime::inPlaceOutputs(program);
  for (size_t k = 0; k < inPlace.size(); ++k)
    if (inPlace[k]) fixed[size_t(program.outputs[k])] = true;
  std::vector<int> order;
  for (size_t id = 0; id < program.buffers.size(); ++id) {
    runtime::BufferDesc& b = program.buffers[id];
    b.offset = -1;
    if (root[id] == int(id) && !fixed[id] && b.constant.empty()) order.push_back(static_cast<int>(id));
  }
  auto aligned = [](int64_t bytes) { return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return program.buffers[a].bytes() > program.buffers[b].bytes();
  });

  std::vector<int> placed;  // kept sorted by offset
  int64_t arena = 0;
  for (int id : order) {
    int64_t size = aligned(int64_t(program.buffers[id].bytes()));
    int64_t offset = 0;
    for (int other : placed) {  // first gap below a live neighbour that is big enough
      if (!life[other].overlaps(life[id])) continue;
      int64_t start = program.buffers[other].offset;
      if (start >= offset + size) break;
      offset = std::max(offset, start + aligned(int64_t(program.buffers[other].bytes())));
    }
    program.buffers[id].offset = offset;
    arena = std::max(arena, offset + size);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), id,
                                   [&](int a, int b) {
                                     return program.buffers[a].offset < program.buffers[b].offset;
                                   }),
                  id);
  }
  for (size_t id = 0; id < program.buffers.size(); ++id)
    if (root[id] != int(id)) program.buffers[id].offset = program.buffers[size_t(root[id])].offset;
  program.arenaBytes = static_cast<size_t>(arena);
  runtime::checkMemoryPlan(program);
}

}  // namespace spmd
