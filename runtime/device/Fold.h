// The one reduction order of spmd's collectives: a fixed binary tree over the virtual replica
// index v = 0..V-1 (V = processes x devices x accumulation steps). Node (h, i) covers the leaves
// [i * 2^h, (i + 1) * 2^h) cut at V; its value is left op right, or its left child alone where
// the right one is empty, in the element type (f32 in f32, f64 in f64, i32 wrapping), and a
// mean divides the root once. The tree depends on V alone, so whoever holds a contiguous block
// of leaves (a replica its accumulation steps, a process its replicas) can reduce the block's
// maximal aligned subtrees where it lies and hand on only their roots: one root for an aligned
// power-of-two block, O(log V) otherwise. Every communicator (in-process, across processes,
// on the device, the reference's gather) folds this tree, so any split of the same V leaves
// into processes, threads and steps gives the same bits. A left fold could not be pre-summed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/base/NanRules.h"
#include "runtime/device/Communicator.h"

namespace spmd::runtime {

// a op b for a tree node (sum and mean add; i32 sums wrap as two's complement).
template <typename T>
SPMD_HOST_DEVICE inline T foldCombine(T a, T b, Reduction op) {
  if (op == Reduction::Max) return nanMax(a, b);
  if (op == Reduction::Min) return nanMin(a, b);
  if constexpr (std::is_integral_v<T>)  // wrap instead of overflowing
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
  else
    return a + b;
}

template <typename T>
SPMD_HOST_DEVICE inline T foldFinish(T root, Reduction op, int divisor) {
  return op == Reduction::Mean ? static_cast<T>(root / static_cast<T>(divisor)) : root;
}

// The tree's root over leaves leaf(0..n-1), per element (the device kernels' form): a stack of
// complete subtrees, merged while the newest is the right sibling of the one below it, then
// merged right to left (the cut nodes at the end of the range).
template <typename T, typename Leaf>
SPMD_HOST_DEVICE inline T foldLeaves(int n, const Leaf& leaf, Reduction op, int divisor) {
  T value[33];
  int level[33];
  int top = 0;
  for (int r = 0; r < n; ++r) {
    T v = leaf(r);
    int h = 0;
    for (; top > 0 && level[top - 1] == h; ++h) v = foldCombine(value[--top], v, op);
    value[top] = v, level[top] = h, ++top;
  }
  T acc = value[top - 1];
  for (int s = top - 2; s >= 0; --s) acc = foldCombine(value[s], acc, op);
  return foldFinish(acc, op, divisor);
}

// A subtree of the fold tree: leaves [index << level, (index + 1) << level), cut at V.
struct FoldNode {
  int level = 0;
  int64_t index = 0;
  int64_t first() const { return index << level; }
};

// The maximal aligned subtrees of leaves [begin, end), in order: what a holder of that block
// hands on.
std::vector<FoldNode> foldBlock(int64_t begin, int64_t end);

// A fold of sources that are consecutive subtrees (FoldNodes in leaf order) into either the
// root (`complete`: the sources start at leaf 0 and end at V) or the maximal subtrees they make
// (roots(), for a holder of a block), compiled once into a list of steps on per-block slots.
class FoldPlan {
 public:
  FoldPlan(const std::vector<FoldNode>& sources, bool complete);
  // Leaves 0..n-1, folded to the root.
  static FoldPlan leaves(int n);
  const std::vector<FoldNode>& roots() const { return roots_; }
  int sourceCount() const { return sources_; }
  // out[k][i - begin] = root k at element i, for i in [begin, end); with a complete plan, the
  // root divided by `divisor` for a mean. An output may alias a source offset by `begin`.
  template <typename T>
  void run(const T* const* sources, int64_t begin, int64_t end, Reduction op, int divisor, T* const* out) const;
  void run(DType dtype, const void* const* sources, int64_t begin, int64_t end, Reduction op, int divisor,
           void* const* out) const;

 private:
  struct Operand {
    bool slot;
    int index;
  };
  struct Step {
    int to;  // slot
    Operand a, b;
  };
  int sources_ = 0, slots_ = 0;
  bool complete_ = false;
  std::vector<Step> steps_;
  std::vector<Operand> rootOperands_;  // where each root lies after the steps
  std::vector<FoldNode> roots_;
};

template <typename T>
void FoldPlan::run(const T* const* sources, int64_t begin, int64_t end, Reduction op, int divisor,
                   T* const* out) const {
  // Blocks of elements, one tree step at a time over the block: the same order per element as
  // foldLeaves, in a form the compiler vectorises (the fold is on the all-reduce's path).
  constexpr int64_t kBlock = 512;
  std::vector<T> slots(size_t(std::max(slots_, 1)) * kBlock);
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t m = std::min(kBlock, end - b);
    auto at = [&](Operand o) -> const T* { return o.slot ? slots.data() + o.index * kBlock : sources[o.index] + b; };
    for (const Step& s : steps_) {
      const T *x = at(s.a), *y = at(s.b);
      T* to = slots.data() + s.to * kBlock;
      switch (op) {
        case Reduction::Sum:
        case Reduction::Mean:
          for (int64_t k = 0; k < m; ++k) to[k] = foldCombine(x[k], y[k], Reduction::Sum);
          break;
        case Reduction::Max:
          for (int64_t k = 0; k < m; ++k) to[k] = nanMax(x[k], y[k]);
          break;
        case Reduction::Min:
          for (int64_t k = 0; k < m; ++k) to[k] = nanMin(x[k], y[k]);
          break;
      }
    }
    for (size_t r = 0; r < rootOperands_.size(); ++r) {
      const T* from = at(rootOperands_[r]);
      T* to = out[r] + (b - begin);
      if (complete_ && op == Reduction::Mean)
        for (int64_t k = 0; k < m; ++k) to[k] = foldFinish(from[k], op, divisor);
      else if (to != from)
        std::memmove(to, from, size_t(m) * sizeof(T));
    }
  }
}

// The root over leaves sources[0..n-1] for elements [begin, end), into out (which may be one of
// the sources offset by `begin`): the in-process communicator's fold.
inline void foldTree(DType dtype, const void* const* sources, int n, int64_t begin, int64_t end, Reduction op,
                     int divisor, void* out) {
  void* outs[] = {out};
  FoldPlan::leaves(n).run(dtype, sources, begin, end, op, divisor, outs);
}

}  // namespace spmd::runtime
