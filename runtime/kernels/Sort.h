// Stable sorts of indices along one axis, for the CUDA backend, the simulator and the CPU's host
// loop: argsort's, and the scatters' (runtime/kernels/TakeAlongAxis.h), which sort each column's
// indices to find the updates of a place by binary search. A tensor is viewed as
// [outer, extent, inner]; a row is the extent elements of one (outer, inner), `inner` apart.
#pragma once

#include <cstdint>

#include "runtime/kernels/Common.h"

namespace spmd::runtime::kernels {

// argsort of a row of up to kArgsortCountUpTo: thread e counts the elements of its row that go
// before its own (ties by index), its rank, and writes its index there: the ranks of a row are a
// permutation, so each output has one writer. One launch, extent compares a thread.
template <typename T>
struct ArgsortFn {
  const T* x;
  int32_t* y;
  int64_t extent, inner;
  bool descending;
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t j = (e / inner) % extent, base = e - j * inner;  // base: the row's element 0
    const T v = x[e];
    int64_t rank = 0;
    for (int64_t k = 0; k < extent; ++k) {
      const T w = x[base + k * inner];
      rank += sortsBefore(w, v, descending) || (k < j && !sortsBefore(v, w, descending));
    }
    y[base + rank * inner] = static_cast<int32_t>(j);
  }
};

// Longer rows: a merge sort of each row's indices, ceil(log2 extent) passes, a thread per element
// (as embedding_backward's sort, runtime/kernels/Embedding.h): in the pass of runs of `width`, an
// index's place in its merged run is its place in its own run plus the count of the partner run's
// indices that go before it, found by binary search. An index of the left run goes after the
// partner's strictly smaller elements only, one of the right run after its smaller or equal ones:
// ties keep their order, so the sort is stable and gives the counting kernel's permutation.
// ids x log2(extent)^2 compares in all, where counting took ids x extent (a 50,000-class row:
// 50,000 compares a thread).
inline constexpr int64_t kArgsortCountUpTo = 256;

template <typename T>
struct ArgsortMergeFn {
  const T* x;
  const int32_t* in;  // null in the first pass: each run of one holds its own index
  int32_t* out;
  int64_t extent, inner, width;
  bool descending;
  SPMD_HOST_DEVICE int64_t indexAt(int64_t base, int64_t p) const { return in ? in[base + p * inner] : p; }
  SPMD_HOST_DEVICE void operator()(int64_t e) const {
    const int64_t p = (e / inner) % extent, base = e - p * inner;
    const int64_t start = p / width * width, partner = start ^ width;
    const int64_t j = indexAt(base, p);
    if (partner >= extent) {  // the row's last run, with no partner this pass
      out[e] = static_cast<int32_t>(j);
      return;
    }
    const T v = x[base + j * inner];
    const bool left = start < partner;
    int64_t lo = 0, hi = extent - partner < width ? extent - partner : width;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      const T w = x[base + indexAt(base, partner + mid) * inner];
      if (left ? sortsBefore(w, v, descending) : !sortsBefore(v, w, descending)) lo = mid + 1;
      else hi = mid;
    }
    const int64_t merged = left ? start : partner;
    out[base + (merged + (p - start) + lo) * inner] = static_cast<int32_t>(j);
  }
};

// y: for each row of x ([n / (extent * inner), extent, inner]), the indices 0..extent-1 in the
// stable order of x's values (sortsBefore; NaN last, or first when descending). `other`: a buffer
// of n indices the merge passes alternate with, unused (null allowed) for rows of up to
// kArgsortCountUpTo.
template <class Api, typename T>
void argsortRows(KernelCall& call, const T* x, int32_t* y, int32_t* other, int64_t n, int64_t extent, int64_t inner,
                 bool descending) {
  if (extent <= kArgsortCountUpTo) {
    Api::forEach(call, n, ArgsortFn<T>{x, y, extent, inner, descending});
    return;
  }
  // The passes alternate between y and other, the last one writing y.
  int passes = 0;
  while ((int64_t{1} << passes) < extent) ++passes;
  const int32_t* in = nullptr;
  for (int pass = 0; pass < passes; ++pass) {
    int32_t* out = (passes - 1 - pass) % 2 == 0 ? y : other;
    Api::forEach(call, n, ArgsortMergeFn<T>{x, in, out, extent, inner, int64_t{1} << pass, descending});
    in = out;
  }
}

}  // namespace spmd::runtime::kernels
