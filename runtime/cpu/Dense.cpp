// CPU matmul: the step's variant (runtime/cpu/CpuVariants.h: oneDNN's matmul, the same on fixed
// one-thread slices, the reference loops for f64), and oneDNN's matmul itself (f32, 2-D or
// batched; transposes as strided layouts, bias fused); bf16 oneDNN's bf16 matmul where the ISA
// has one (onednnBf16), else the f32 variants between roundings. Argmax as row loops.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/base/NanRules.h"
#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {

void matmul(KernelCall& call) {
  if (emptySums(call)) return;
  if (call.in[0].dtype == DType::bf16 && !onednnBf16()) return widenedOnCpu(call, &matmul);
  runVariant(call, cpuVariants(call.step.op));
}

void onednnMatmul(KernelCall& call) {
  const DType type = call.in[0].dtype;
  bool hasBias = call.in.size() > 2;
  Prepared& p = cachedState<Prepared>(call, [&] {
    using namespace dnnl;
    using tag = memory::format_tag;
    bool ta = attrsOf<MatmulAttrs>(call.step).transpose_lhs, tb = attrsOf<MatmulAttrs>(call.step).transpose_rhs;
    size_t r = call.out[0].rank() - 2;  // batched: [B, M, N], one product per batch entry
    int64_t m = call.out[0].dim(r), n = call.out[0].dim(r + 1);
    int64_t k = ta ? call.in[0].dim(r) : call.in[0].dim(r + 1);
    auto desc2 = [&](int64_t rows, int64_t cols, bool transposed) {
      if (r == 0) return memory::desc({rows, cols}, dnnlType(type), transposed ? tag::ba : tag::ab);
      return memory::desc({call.out[0].dim(0), rows, cols}, dnnlType(type), transposed ? tag::acb : tag::abc);
    };
    memory::desc a = desc2(m, k, ta), b = desc2(k, n, tb), c = desc2(m, n, false);
    memory::desc bias = r == 0 ? memory::desc({1, n}, dnnlType(type), tag::ab)
                               : memory::desc({1, 1, n}, dnnlType(type), tag::abc);
    auto desc = hasBias ? matmul::desc(a, b, bias, c) : matmul::desc(a, b, c);
    Prepared prepared{dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine())),
                      stream(engine()), {}};
    prepared.bind(DNNL_ARG_SRC, a);
    prepared.bind(DNNL_ARG_WEIGHTS, b);
    prepared.bind(DNNL_ARG_DST, c);
    if (hasBias) prepared.bind(DNNL_ARG_BIAS, bias);
    return prepared;
  });
  if (hasBias)
    p.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_WEIGHTS, call.in[1].data},
           {DNNL_ARG_BIAS, call.in[2].data}, {DNNL_ARG_DST, call.out[0].data}});
  else
    p.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_WEIGHTS, call.in[1].data},
           {DNNL_ARG_DST, call.out[0].data}});
}

void argmax(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& x = call.in[0];
    if (call.out[0].numel() == 0) return;  // else every extent is positive (the shape rule refuses an empty axis)
    int64_t axis = attrsOf<AxisAttrs>(call.step).axis, extent = x.dim(axis);
    int64_t inner = numElements(x.shape.subspan(axis + 1)), outer = x.numel() / (extent * inner);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* base = x.as<T>() + o * extent * inner + i;
        int32_t best = 0;
        for (int64_t j = 1; j < extent; ++j)
          if (argmaxTakes(base[j * inner], base[best * inner])) best = static_cast<int32_t>(j);
        call.out[0].as<int32_t>()[o * inner + i] = best;
      }
  });
}

// Rows side by side on the replica's threads; each row gathered, then std::stable_sort of its
// indices by NanRules' sortsBefore (n log n).
void argsort(KernelCall& call) {
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const TensorView& x = call.in[0];
    const SortAttrs& a = attrsOf<SortAttrs>(call.step);
    const int64_t extent = x.dim(a.axis), inner = numElements(x.shape.subspan(a.axis + 1));
    const int64_t rows = extent ? x.numel() / extent : 0;
    const T* in = x.as<T>();
    int32_t* out = call.out[0].as<int32_t>();
#pragma omp parallel if (rows > 1 && rows * extent > 4096)
    {
      std::vector<T> row(static_cast<size_t>(extent));  // a thread's buffers, for all its rows
      std::vector<int32_t> order(static_cast<size_t>(extent));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t base = (r / inner) * extent * inner + r % inner;
        for (int64_t j = 0; j < extent; ++j) row[size_t(j)] = in[base + j * inner], order[size_t(j)] = int32_t(j);
        std::stable_sort(order.begin(), order.end(),
                         [&](int32_t p, int32_t q) { return sortsBefore(row[size_t(p)], row[size_t(q)], a.descending); });
        for (int64_t j = 0; j < extent; ++j) out[base + j * inner] = order[size_t(j)];
      }
    }
  });
}

}  // namespace spmd::runtime::cpu
