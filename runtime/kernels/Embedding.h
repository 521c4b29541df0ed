// embedding (rows of a table at i32 ids) and its backward for the CUDA backend, the simulator
// and the CPU backend. The backward gathers: table-gradient element (v, d) sums, in id order,
// the result-gradient rows whose id is v, so no two calls write one element and the sum does
// not depend on thread timing (no atomics); its cost is rows x dim x ids.
#pragma once

#include "runtime/kernels/Common.h"

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

template <typename T>
struct EmbeddingBackwardFn {
  const T* dy;
  const int32_t* ids;
  T* dtable;
  int64_t count, dim;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t row = i / dim, d = i % dim;
    double sum = 0;
    for (int64_t p = 0; p < count; ++p)
      if (ids[p] == row) sum += double(dy[p * dim + d]);
    dtable[i] = static_cast<T>(sum);
  }
};

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

// inputs: result_grad [ids..., D], ids; output: table_grad [V, D].
template <class Api>
void embedding_backward(KernelCall& call) {
  int64_t dim = call.out[0].dim(1);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(),
                 EmbeddingBackwardFn<T>{call.in[0].as<T>(), call.in[1].as<int32_t>(), call.out[0].as<T>(),
                                        call.in[1].numel(), dim});
  });
}

#define SPMD_LIBRARY_EMBEDDING_OPS(X) X(embedding) X(embedding_backward)

}  // namespace spmd::runtime::kernels
