// FoldPlan: the fold tree's steps for a list of consecutive subtrees (runtime/device/Fold.h).
#include "runtime/device/Fold.h"

#include <string>

#include "runtime/base/Error.h"

namespace spmd::runtime {

std::vector<FoldNode> foldBlock(int64_t begin, int64_t end) {
  std::vector<FoldNode> nodes;
  for (int64_t x = begin; x < end;) {
    int h = 0;
    while (h < 62 && (x & ((int64_t(1) << (h + 1)) - 1)) == 0 && x + (int64_t(1) << (h + 1)) <= end) ++h;
    nodes.push_back({h, x >> h});
    x += int64_t(1) << h;
  }
  return nodes;
}

FoldPlan FoldPlan::leaves(int n) {
  std::vector<FoldNode> nodes(size_t(std::max(n, 0)));
  for (int r = 0; r < n; ++r) nodes[r] = {0, r};
  return FoldPlan(nodes, true);
}

FoldPlan::FoldPlan(const std::vector<FoldNode>& sources, bool complete)
    : sources_(static_cast<int>(sources.size())), complete_(complete) {
  if (sources.empty()) throw Error("a fold needs at least one source");
  if (complete && sources.front().first() != 0)
    throw Error("a complete fold must start at leaf 0, not " + std::to_string(sources.front().first()));
  struct Entry {
    FoldNode node;
    Operand where;
  };
  std::vector<Entry> stack;
  std::vector<int> freeSlots;
  auto merge = [&](const Entry& a, const Entry& b, FoldNode node) {
    int to;
    if (a.where.slot) to = a.where.index;
    else if (b.where.slot) to = b.where.index;
    else if (!freeSlots.empty()) to = freeSlots.back(), freeSlots.pop_back();
    else to = slots_++;
    if (a.where.slot && b.where.slot && b.where.index != to) freeSlots.push_back(b.where.index);
    steps_.push_back({to, a.where, b.where});
    return Entry{node, {true, to}};
  };
  int64_t next = sources.front().first();
  for (int s = 0; s < sources_; ++s) {
    const FoldNode& n = sources[s];
    if (n.first() != next)
      throw Error("fold sources must be consecutive subtrees: source " + std::to_string(s) + " starts at leaf " +
                  std::to_string(n.first()) + ", expected " + std::to_string(next));
    next = n.first() + (int64_t(1) << n.level);
    stack.push_back({n, {false, s}});
    // Merge while the newest is the right sibling of the one below it.
    while (stack.size() >= 2) {
      const Entry &left = stack[stack.size() - 2], &right = stack.back();
      if (left.node.level != right.node.level || left.node.index % 2 != 0 || left.node.index + 1 != right.node.index)
        break;
      Entry merged = merge(left, right, {left.node.level + 1, left.node.index / 2});
      stack.pop_back(), stack.pop_back();
      stack.push_back(merged);
    }
  }
  if (complete) {  // the cut nodes at the end: right to left
    while (stack.size() >= 2) {
      Entry merged = merge(stack[stack.size() - 2], stack.back(), stack[stack.size() - 2].node);
      stack.pop_back(), stack.pop_back();
      stack.push_back(merged);
    }
  }
  for (const Entry& e : stack) rootOperands_.push_back(e.where), roots_.push_back(e.node);
}

void FoldPlan::run(DType dtype, const void* const* sources, int64_t begin, int64_t end, Reduction op, int divisor,
                   void* const* out) const {
  switch (dtype) {
    case DType::f32:
      run<float>(reinterpret_cast<const float* const*>(sources), begin, end, op, divisor,
                 reinterpret_cast<float* const*>(out));
      break;
    case DType::f64:
      run<double>(reinterpret_cast<const double* const*>(sources), begin, end, op, divisor,
                  reinterpret_cast<double* const*>(out));
      break;
    case DType::bf16:
      throw bf16NotWidened("a collective");
    case DType::i32:
      run<int32_t>(reinterpret_cast<const int32_t* const*>(sources), begin, end, op, divisor,
                   reinterpret_cast<int32_t* const*>(out));
      break;
  }
}

}  // namespace spmd::runtime
