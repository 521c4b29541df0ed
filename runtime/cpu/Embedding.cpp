// CPU embedding and its backward as row loops on the OpenMP pool: the library's per-element host
// loop (runtime/kernels/Embedding.h) runs on one thread with a division per element. The backward
// sorts the positions by id with a counting sort (ids + rows), then each table row, on one thread,
// sums its positions' result-gradient rows in position order in double, as the library's kernel
// and the reference do, so the bits are theirs whatever the threads; a row no id picks is zeroed.
#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/cpu/Kernels.h"

namespace spmd::runtime::cpu {
namespace {

constexpr int64_t kParallelElements = 1 << 15;  // below this, one thread

}  // namespace

// inputs: table [V, D], ids; output [ids..., D].
void embedding(KernelCall& call) {
  const int64_t rows = call.in[0].dim(0), dim = call.in[0].dim(1), count = call.in[1].numel();
  const int32_t* ids = call.in[1].as<int32_t>();
  for (int64_t p = 0; p < count; ++p) checkId(ids[p], p, rows);  // before the threads: they cannot throw
  const size_t rowBytes = size_t(dim) * dtypeSize(call.in[0].dtype);
  const auto* table = static_cast<const std::byte*>(call.in[0].data);
  auto* out = static_cast<std::byte*>(call.out[0].data);
#pragma omp parallel for if (count * dim >= kParallelElements) schedule(static)
  for (int64_t p = 0; p < count; ++p) std::memcpy(out + p * rowBytes, table + ids[p] * rowBytes, rowBytes);
}

// inputs: result_grad [ids..., D], ids; output: table_grad [V, D].
void embedding_backward(KernelCall& call) {
  const int64_t rows = call.out[0].dim(0), dim = call.out[0].dim(1), count = call.in[1].numel();
  const int32_t* ids = call.in[1].as<int32_t>();
  // starts[v]..starts[v + 1]: row v's positions in `order`, ascending. The ids are checked in the
  // count (spmd::segmentSum's only check; an embedding's passed its lookup's).
  std::vector<int64_t> starts(rows + 1, 0), order(count);
  for (int64_t p = 0; p < count; ++p) {
    checkTakeIndex(ids[p], p, rows);
    ++starts[ids[p] + 1];
  }
  for (int64_t v = 0; v < rows; ++v) starts[v + 1] += starts[v];
  std::vector<int64_t> next(starts.begin(), starts.end() - 1);
  for (int64_t p = 0; p < count; ++p) order[next[ids[p]]++] = p;
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* dy = call.in[0].as<T>();
    T* dtable = call.out[0].as<T>();
#pragma omp parallel if (rows * dim >= kParallelElements)
    {
      std::vector<double> sum(dim);
#pragma omp for schedule(static)
      for (int64_t v = 0; v < rows; ++v) {
        T* row = dtable + v * dim;
        if (starts[v] == starts[v + 1]) {
          std::fill(row, row + dim, T(0));
          continue;
        }
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t s = starts[v]; s < starts[v + 1]; ++s) {
          const T* from = dy + order[s] * dim;
          for (int64_t d = 0; d < dim; ++d) sum[d] += double(from[d]);
        }
        for (int64_t d = 0; d < dim; ++d) row[d] = static_cast<T>(sum[d]);
      }
    }
  });
}

}  // namespace spmd::runtime::cpu
