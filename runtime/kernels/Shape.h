// Shape kernels of the CUDA backend and the simulator: broadcast_in_dim and transpose as one
// strided gather (result index -> source offset), reshape as a device-to-device copy, relayout
// as a gather between two layouts of an NCHW tensor (runtime/program/Layouts.h). Any element
// type (moved by size).
#pragma once

#include <vector>

#include "runtime/kernels/Common.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::kernels {

constexpr int kMaxRank = 8;

struct Gather {
  int rank;
  int64_t dims[kMaxRank];     // result shape
  int64_t strides[kMaxRank];  // source element stride per result dim (0: broadcast)
};

template <typename T>
struct GatherFn {
  const T* x;
  T* y;
  Gather g;
  SPMD_HOST_DEVICE void operator()(int64_t i) const { y[i] = x[offsetOf(g.dims, g.strides, g.rank, i)]; }
};

// GatherFn a run at a time: `g` without its innermost dimension, which is `run` contiguous
// elements in both x and y (one index and offset computed a run, not an element).
template <typename T>
struct GatherRunsFn {
  const T* x;
  T* y;
  Gather g;
  int64_t run;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    const int64_t from = offsetOf(g.dims, g.strides, g.rank, i);
    for (int64_t k = 0; k < run; ++k) y[i * run + k] = x[from + k];
  }
};

inline Gather resultShape(const TensorView& y) {
  if (y.rank() > static_cast<size_t>(kMaxRank))
    throw Error("GPU shape kernels support rank <= 8, got rank " + std::to_string(y.rank()));
  Gather g{static_cast<int>(y.rank()), {}, {}};
  for (size_t d = 0; d < y.rank(); ++d) g.dims[d] = y.dim(d);
  return g;
}

// `Fn<U>` from x over y, U the unsigned integer of the element's size (a move, not a conversion:
// any dtype, bf16 included).
template <class Api, template <typename> class Fn, typename Args>
void bySize(KernelCall& call, const TensorView& x, const TensorView& y, const Args& args) {
  const int64_t n = y.numel();
  switch (dtypeSize(x.dtype)) {
    case 8: return Api::forEach(call, n, Fn<uint64_t>{x.as<uint64_t>(), y.as<uint64_t>(), args});
    case 4: return Api::forEach(call, n, Fn<uint32_t>{x.as<uint32_t>(), y.as<uint32_t>(), args});
    case 2: return Api::forEach(call, n, Fn<uint16_t>{x.as<uint16_t>(), y.as<uint16_t>(), args});
    default: throw Error("shape kernels move 2-, 4- or 8-byte elements, not " + std::to_string(dtypeSize(x.dtype)));
  }
}

template <class Api>
void gather(KernelCall& call, const Gather& g) {
  bySize<Api, GatherFn>(call, call.in[0], call.out[0], g);
}

template <class Api>
void broadcast_in_dim(KernelCall& call) {
  const auto& dims = attrsOf<DimsAttrs>(call.step).dims;
  Gather g = resultShape(call.out[0]);
  const Shape strides = rowMajorStrides(call.in[0].shape);
  for (size_t i = 0; i < dims.size(); ++i)
    if (call.in[0].dim(i) != 1) g.strides[dims[i]] = strides[i];
  gather<Api>(call, g);
}

template <class Api>
void transpose(KernelCall& call) {
  const auto& perm = attrsOf<PermAttrs>(call.step).perm;
  Gather g = resultShape(call.out[0]);
  const Shape strides = rowMajorStrides(call.in[0].shape);
  for (size_t i = 0; i < perm.size(); ++i) g.strides[i] = strides[perm[i]];
  gather<Api>(call, g);
}

template <class Api>
void reshape(KernelCall& call) {
  if (call.out[0].data == call.in[0].data) return;  // the memory plan put the result in place
  Api::copy(call, call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(call.in[0].dtype));
}

// An [N, C, H, W] tensor from one layout to another: each result element's (n, c, h, w) from
// its index in the result's layout, read at its offset in the input's. `from`, `to`: the
// layouts' channels innermost (innerBlock: 0 plain, B for nChw<B>c, C for nhwc), the formula of
// runtime/program/Layouts.h's blockedOffset (host code; this runs on the device too).
struct Relayout {
  int64_t C, H, W, from, to;
};

template <typename T>
struct RelayoutFn {
  const T* x;
  T* y;
  Relayout r;
  SPMD_HOST_DEVICE void operator()(int64_t i) const {
    int64_t n, c, h, w, rest = i;
    if (r.to == 0) {
      w = rest % r.W, rest /= r.W, h = rest % r.H, rest /= r.H, c = rest % r.C, n = rest / r.C;
    } else {
      const int64_t within = rest % r.to;
      rest /= r.to, w = rest % r.W, rest /= r.W, h = rest % r.H, rest /= r.H;
      const int64_t blocks = r.C / r.to;
      c = (rest % blocks) * r.to + within, n = rest / blocks;
    }
    const int64_t from = r.from == 0 ? ((n * r.C + c) * r.H + h) * r.W + w
                                     : (((n * (r.C / r.from) + c / r.from) * r.H + h) * r.W + w) * r.from + c % r.from;
    y[i] = x[from];
  }
};

// x's elements into y in y's layout, queued on the call's stream (the relayout op's kernel, and
// the simulator's convolutions in channels-last).
template <class Api>
void relayoutInto(KernelCall& call, const TensorView& x, const TensorView& y) {
  if (x.layout == y.layout) return Api::copy(call, y.data, x.data, size_t(x.numel()) * dtypeSize(x.dtype));
  for (const TensorView* t : {&x, &y})
    if (std::string problem = layoutProblem(t->layout, t->shape); !problem.empty())
      throw Error("relayout (" + call.step.where() + "): " + problem + ", got " +
                  shapeString(Shape(t->shape.begin(), t->shape.end())));
  const int64_t C = x.dim(1);
  bySize<Api, RelayoutFn>(call, x, y, Relayout{C, x.dim(2), x.dim(3), innerBlock(x.layout, C), innerBlock(y.layout, C)});
}

template <class Api>
void relayout(KernelCall& call) {
  relayoutInto<Api>(call, call.in[0], call.out[0]);
}

#define SPMD_LIBRARY_SHAPE_OPS(X) X(broadcast_in_dim) X(transpose) X(reshape) X(relayout)

}  // namespace spmd::runtime::kernels
