// slice, pad, concatenate and select for the CUDA backend, the simulator and the CPU backend:
// one functor call per element of the written tensor, mapping its index through a box (an
// offset per dim). Shape ops move any element type by size; select is float only.
#pragma once

#include "runtime/kernels/Shape.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

// Index i of a tensor of `dims` maps to the element at `offset` + its multi-index in a tensor of
// `outer` dims; with `inside`, positions outside `outer` read as zero (pad).
struct Box {
  int rank;
  int64_t dims[kMaxRank], outer[kMaxRank], offset[kMaxRank];

  // The linear index in `outer` of element i, or -1 when it falls outside.
  SPMD_HOST_DEVICE int64_t map(int64_t i) const {
    int64_t rest = i, at = 0, stride = 1;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t coordinate = rest % dims[d] + offset[d];
      rest /= dims[d];
      if (coordinate < 0 || coordinate >= outer[d]) return -1;
      at += coordinate * stride;
      stride *= outer[d];
    }
    return at;
  }
};

inline Box boxOf(const TensorView& inner, const TensorView& outer, const std::vector<int64_t>& offset) {
  if (inner.rank() > size_t(kMaxRank)) throw Error("slice, pad and concatenate support rank <= 8");
  Box box{int(inner.rank()), {}, {}, {}};
  for (size_t d = 0; d < inner.rank(); ++d) {
    box.dims[d] = inner.dim(d);
    box.outer[d] = outer.dim(d);
    box.offset[d] = offset[d];
  }
  return box;
}

// Reads: y[i] = x[box.map(i)] (0 outside). Writes (concatenate): y[box.map(i)] = x[i].
template <typename T, bool Scatter>
struct BoxFn {
  const T* x;
  T* y;
  Box box;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t j = box.map(i);
    if (Scatter) y[j] = x[i];
    else y[i] = j < 0 ? T(0) : x[j];
  }
};

template <class Api, bool Scatter>
void moveBox(KernelCall& call, const TensorView& from, const TensorView& to, const Box& box, int64_t n) {
  if (dtypeSize(from.dtype) == 8)
    Api::forEach(call, n, BoxFn<int64_t, Scatter>{from.as<int64_t>(), to.as<int64_t>(), box});
  else
    Api::forEach(call, n, BoxFn<int32_t, Scatter>{from.as<int32_t>(), to.as<int32_t>(), box});
}

template <class Api>
void slice(KernelCall& call) {
  moveBox<Api, false>(call, call.in[0], call.out[0], boxOf(call.out[0], call.in[0], attrsOf<SliceAttrs>(call.step).start),
                      call.out[0].numel());
}

template <class Api>
void pad(KernelCall& call) {
  std::vector<int64_t> offset = attrsOf<PadAttrs>(call.step).low;
  for (int64_t& o : offset) o = -o;
  moveBox<Api, false>(call, call.in[0], call.out[0], boxOf(call.out[0], call.in[0], offset), call.out[0].numel());
}

template <class Api>
void concatenate(KernelCall& call) {
  int64_t axis = attrsOf<AxisAttrs>(call.step).axis, at = 0;
  for (const TensorView& x : call.in) {
    std::vector<int64_t> offset(x.rank(), 0);
    offset[axis] = at;
    at += x.dim(axis);
    moveBox<Api, true>(call, x, call.out[0], boxOf(x, call.out[0], offset), x.numel());
  }
}

template <typename T>
struct SelectFn {
  const T *c, *a, *b;
  T* y;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = c[i] != T(0) ? a[i] : b[i]; }
};

template <class Api>
void select(KernelCall& call) {
  visitFloat(call.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    Api::forEach(call, call.out[0].numel(),
                 SelectFn<T>{call.in[0].as<T>(), call.in[1].as<T>(), call.in[2].as<T>(), call.out[0].as<T>()});
  });
}

#define SPMD_LIBRARY_SLICE_OPS(X) X(slice) X(pad) X(concatenate) X(select)

}  // namespace spmd::runtime::kernels
