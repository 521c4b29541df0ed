// The one reduction order of spmd's collectives: element i of the result folds the replicas'
// values in replica order, acc = x[0]; acc = acc op x[r] for r = 1..n-1, in the accumulator type
// (double for floats, int64 for i32), divided by `divisor` for a mean, then rounded once. The
// in-process communicator and the exact mode across processes both use it, so any split of the
// same replicas into threads and processes gives the same bits.
#pragma once

#include <algorithm>
#include <cstdint>

#include "runtime/base/DType.h"
#include "runtime/base/NanRules.h"
#include "runtime/device/Communicator.h"

namespace spmd::runtime {

// out[i - begin] = fold of sources[0][i], ..., sources[n-1][i] for i in [begin, end); `out` may
// be one of the sources, offset by `begin` (each block is read before it is written).
template <typename T, typename Acc>
void foldInOrder(const T* const* sources, int n, int64_t begin, int64_t end, Reduction op, int divisor, T* out) {
  // Blocks of elements, one source at a time: the same order per element as a plain loop over
  // replicas, in a form the compiler vectorises (the fold is on the all-reduce's critical path).
  constexpr int64_t kBlock = 512;
  Acc acc[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t m = std::min(kBlock, end - b);
    const T* first = sources[0] + b;
    for (int64_t k = 0; k < m; ++k) acc[k] = first[k];
    for (int r = 1; r < n; ++r) {
      const T* x = sources[r] + b;
      switch (op) {
        case Reduction::Sum:
        case Reduction::Mean:
          for (int64_t k = 0; k < m; ++k) acc[k] += Acc(x[k]);
          break;
        case Reduction::Max:  // NaN propagates (runtime/base/NanRules.h), as in every kernel
          for (int64_t k = 0; k < m; ++k) acc[k] = nanMax(acc[k], Acc(x[k]));
          break;
        case Reduction::Min:
          for (int64_t k = 0; k < m; ++k) acc[k] = nanMin(acc[k], Acc(x[k]));
          break;
      }
    }
    if (op == Reduction::Mean)
      for (int64_t k = 0; k < m; ++k) acc[k] /= divisor;
    T* to = out + (b - begin);
    for (int64_t k = 0; k < m; ++k) to[k] = static_cast<T>(acc[k]);
  }
}

// foldInOrder for a runtime dtype, over untyped buffers.
inline void foldInOrder(DType dtype, const void* const* sources, int n, int64_t begin, int64_t end, Reduction op,
                        int divisor, void* out) {
  switch (dtype) {
    case DType::f32:
      foldInOrder<float, double>(reinterpret_cast<const float* const*>(sources), n, begin, end, op, divisor,
                                 static_cast<float*>(out));
      break;
    case DType::f64:
      foldInOrder<double, double>(reinterpret_cast<const double* const*>(sources), n, begin, end, op, divisor,
                                  static_cast<double*>(out));
      break;
    case DType::i32:
      foldInOrder<int32_t, int64_t>(reinterpret_cast<const int32_t* const*>(sources), n, begin, end, op, divisor,
                                    static_cast<int32_t*>(out));
      break;
  }
}

}  // namespace spmd::runtime
