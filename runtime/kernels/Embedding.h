// embedding (rows of a table at i32 ids) and its backward for the CUDA backend, the simulator
// and the CPU backend. The backward sorts before it sums: the (id, position) pairs are sorted by a
// merge sort of log2(ids) passes (each element's place is its rank in its run plus its count of
// smaller keys in the partner run, found by binary search: no atomics, no scan), each table row's
// first pair is found by binary search, and table-gradient element (v, d) then sums, in position
// order, the result-gradient rows whose id is v. No two calls write one element and the sum does
// not depend on thread timing; its cost is ids x log2(ids)^2 + rows x log2(ids) + ids x dim, where
// gathering for every row without sorting was rows x dim x ids. segment_reduce (segment max and
// min) sorts the same way and folds each row's run in position order instead of summing it.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/kernels/Common.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

template <typename T>
struct EmbeddingFn {
  const T* table;
  const int32_t* ids;
  T* out;
  int64_t rows, dim;
  BadIndexFlag* bad;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t position = i / dim;
    int32_t id = ids[position];
    out[i] = indexValid(id, position, rows, bad) ? table[int64_t(id) * dim + i % dim] : T(0);
  }
};

// The sort's key of the id at `position`: ids above positions, so sorting keys sorts by id and,
// for one id, by position. A negative id becomes a large unsigned one and sorts after every row.
SPMD_HOST_DEVICE inline uint64_t embeddingKey(int32_t id, int64_t position) {
  return (uint64_t(uint32_t(id)) << 32) | uint64_t(position);
}

// How many of the `n` ascending keys at `sorted` are below `key`.
SPMD_HOST_DEVICE inline int64_t keysBelow(const uint64_t* sorted, int64_t n, uint64_t key) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (sorted[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

struct EmbeddingKeysFn {
  const int32_t* ids;
  uint64_t* keys;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { keys[i] = embeddingKey(ids[i], i); }
};

// One merge pass: runs of `width` sorted keys merged pairwise into runs of 2 x width. The keys
// are distinct, so each has one place and the pass is a permutation.
struct EmbeddingMergeFn {
  const uint64_t* in;
  uint64_t* out;
  int64_t n, width;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t start = i / width * width, partner = start ^ width;
    if (partner >= n) {
      out[i] = in[i];
      return;
    }
    const int64_t partnerSize = n - partner < width ? n - partner : width;
    const int64_t merged = start < partner ? start : partner;
    out[merged + (i - start) + keysBelow(in + partner, partnerSize, in[i])] = in[i];
  }
};

// starts[v]: the first sorted key of row v (starts[rows]: past the last valid id).
struct EmbeddingRowStartFn {
  const uint64_t* sorted;
  int64_t* starts;
  int64_t count;
  SPMD_HOST_DEVICE void operator()(int64_t v) const { starts[v] = keysBelow(sorted, count, uint64_t(v) << 32); }
};

template <typename T>
struct EmbeddingBackwardFn {
  const T* dy;
  const uint64_t* sorted;
  const int64_t* starts;
  T* dtable;
  int64_t dim;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t row = i / dim, d = i % dim;
    double sum = 0;
    for (int64_t s = starts[row]; s < starts[row + 1]; ++s) sum += double(dy[int64_t(sorted[s] & 0xffffffffu) * dim + d]);
    dtable[i] = static_cast<T>(sum);
  }
};

// Segment max / min: result element (v, d) folds data's rows of id v, in position order.
template <typename T>
struct SegmentFoldFn {
  const T* data;
  const uint64_t* sorted;
  const int64_t* starts;
  T* out;
  int64_t dim;
  bool max;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t row = i / dim, d = i % dim;
    T r = static_cast<T>(max ? -INFINITY : INFINITY);
    for (int64_t s = starts[row]; s < starts[row + 1]; ++s) {
      const T v = data[int64_t(sorted[s] & 0xffffffffu) * dim + d];
      r = max ? nanMax(r, v) : nanMin(r, v);
    }
    out[i] = r;
  }
};

// The scratch words sortedIds takes for `count` ids over `rows` rows.
inline size_t sortedIdsWords(int64_t count, int64_t rows) { return size_t(2 * count + rows + 1); }

struct SortedIds {
  const uint64_t* sorted;  // (id, position) keys in order
  const int64_t* starts;   // starts[v]: row v's first key; starts[rows]: past the last valid id
};

// Queues the sort of `count` ids' (id, position) keys and each row's start, in `words` (sortedIdsWords).
template <class Api>
SortedIds sortedIds(KernelCall& call, const int32_t* ids, int64_t count, int64_t rows, uint64_t* words) {
  if (count > int64_t(UINT32_MAX))
    throw Error(call.step.op + ": " + std::to_string(count) +
                " ids do not fit the sort's 32-bit positions; split the lookup into parts of at most " +
                std::to_string(UINT32_MAX) + " ids");
  uint64_t *in = words, *out = words + count;
  Api::forEach(call, count, EmbeddingKeysFn{ids, in});
  for (int64_t width = 1; width < count; width *= 2) {
    Api::forEach(call, count, EmbeddingMergeFn{in, out, count, width});
    std::swap(in, out);
  }
  auto* starts = reinterpret_cast<int64_t*>(words + 2 * count);
  Api::forEach(call, rows + 1, EmbeddingRowStartFn{in, starts, count});
  return {in, starts};
}

// inputs: table [V, D], ids; output [ids..., D].
template <class Api>
void embedding(KernelCall& call) {
  int64_t rows = call.in[0].dim(0), dim = call.in[0].dim(1);
  withIndexCheck<Api>(
      call,
      [&](BadIndexFlag* flag) {
        visitFloat(call.in[0].dtype, [&](auto tag) {
          using T = decltype(tag);
          Api::forEach(call, call.out[0].numel(),
                       EmbeddingFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.out[0].as<T>(), rows, dim, flag});
        });
      },
      [rows](int id, int64_t position) { checkId(id, position, rows); });
}

// The rows of in[0] [N, W] folded into out[0] [rows, W] by the i32 ids in[1] [N]: the ids checked
// (an id outside [0, rows) stops the run naming its position; the sort leaves such ids out), sorted
// with their positions, then `fold(T{}, sorted ids)` gives the functor for each result element.
// The step's scratch after the flag: two key buffers the passes alternate between, then the row starts.
template <class Api, typename Fold>
void foldRowsById(KernelCall& call, Fold fold) {
  const int64_t rows = call.out[0].dim(0), count = call.in[1].numel();
  withIndexCheck<Api>(
      call,
      [&](BadIndexFlag* flag) {
        const int32_t* ids = call.in[1].as<int32_t>();
        Api::forEach(call, count, AxisIndexCheckFn{ids, rows, flag});
        const SortedIds s = sortedIds<Api>(call, ids, count, rows, reinterpret_cast<uint64_t*>(indexCheckWork(flag)));
        visitFloat(call.in[0].dtype, [&](auto tag) { Api::forEach(call, call.out[0].numel(), fold(tag, s)); });
      },
      [rows](int index, int64_t position) { checkTakeIndex(index, position, rows); },
      sortedIdsWords(count, rows) * sizeof(uint64_t));
}

// inputs: result_grad [ids..., D], ids; output: table_grad [V, D]. The ids are checked, as
// segment_reduce's: an embedding's were by its lookup, a segment sum's (spmd::segmentSum) are
// checked here alone.
template <class Api>
void embedding_backward(KernelCall& call) {
  const int64_t dim = call.out[0].dim(1);
  foldRowsById<Api>(call, [&](auto tag, const SortedIds& s) {
    using T = decltype(tag);
    return EmbeddingBackwardFn<T>{call.in[0].as<T>(), s.sorted, s.starts, call.out[0].as<T>(), dim};
  });
}

// inputs: data [N, W], segment_ids [N]; output [segments, W].
template <class Api>
void segment_reduce(KernelCall& call) {
  const int64_t dim = call.out[0].dim(1);
  const bool max = attrsOf<SegmentAttrs>(call.step).reduction == Reduction::Max;
  foldRowsById<Api>(call, [&](auto tag, const SortedIds& s) {
    using T = decltype(tag);
    return SegmentFoldFn<T>{call.in[0].as<T>(), s.sorted, s.starts, call.out[0].as<T>(), dim, max};
  });
}

#define SPMD_LIBRARY_EMBEDDING_OPS(X) X(embedding) X(embedding_backward) X(segment_reduce)

}  // namespace spmd::runtime::kernels
