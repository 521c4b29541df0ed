// CPU conv2d: the step's variant (runtime/cpu/CpuVariants.h: Winograd, stride-2 GEMMs, oneDNN,
// the reference loops for f64), and oneDNN's direct convolution, the variant for any shape.
// oneDNN picks its preferred (blocked) layouts; an input or result whose buffer lies in another
// layout is reordered around the call (none is when the compiler's spmd-assign-layouts gave the
// buffers oneDNN's layout; the filter stays plain OIHW). bf16 (a step the compiler kept in bf16)
// runs oneDNN's bf16 convolution where the ISA has one (onednnBf16), else the f32 variants
// between roundings (runtime/device/WidenedBf16.h). A conv2d with relu (spmd-fuse-relu's form)
// takes max(0, y) in one pass over its result after whichever variant ran, by the relu op's NaN
// rules (oneDNN's relu post-op would give -0 for -0 and is not asked for).
#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/kernels/Dense.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {
namespace {

struct ConvState {
  dnnl::convolution_forward conv;
  dnnl::stream stream;
  std::optional<Relayout> src, weights, dst;
  dnnl::memory bias;
};

template <typename T>
void reluInPlace(T* y, int64_t n) {
  const kernels::ReluInPlaceFn<T> relu{y};
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) relu(i);
}

void reluInPlace(const TensorView& y) {
  const int64_t n = y.numel();  // every layout holds exactly the tensor's elements (Layouts.h)
  if (y.dtype == DType::bf16) return reluInPlace(y.as<bf16>(), n);
  visitFloat(y.dtype, [&](auto tag) { reluInPlace(y.as<decltype(tag)>(), n); });
}

}  // namespace

void conv2d(KernelCall& call) {
  if (!emptySums(call)) {
    if (call.in[0].dtype == DType::bf16 && !onednnBf16()) return widenedOnCpu(call, &conv2d);
    runVariant(call, cpuVariants(call.step.op));
  }
  if (convAttrs(call.step).relu) reluInPlace(call.out[0]);
}

void onednnConv2d(KernelCall& call) {
  const DType type = call.in[0].dtype;
  bool hasBias = call.in.size() > 2;
  ConvState& s = cachedState<ConvState>(call, [&] {
    using namespace dnnl;
    ConvGeometry g(call.step);
    const auto& strides = g.strides;
    const auto& padding = g.padding;
    auto src = anyDesc(call.in[0].shape, type), wei = g.anyWeights(call.in[1].shape, type),
         dst = anyDesc(call.out[0].shape, type);
    auto desc = hasBias ? convolution_forward::desc(prop_kind::forward_training,
                                                    algorithm::convolution_direct, src, wei,
                                                    plainDesc(call.in[2].shape, type), dst, strides,
                                                    g.dilates, padding, padding)
                        : convolution_forward::desc(prop_kind::forward_training,
                                                    algorithm::convolution_direct, src, wei, dst,
                                                    strides, g.dilates, padding, padding);
    convolution_forward::primitive_desc pd(desc, engine());
    ConvState state{convolution_forward(pd), stream(engine()), {}, {}, {}, {}};
    state.src.emplace(layoutDesc(call.in[0]), pd.src_desc(), false);
    state.weights.emplace(g.plainWeights(call.in[1].shape, type), pd.weights_desc(), false);
    state.dst.emplace(layoutDesc(call.out[0]), pd.dst_desc(), true);
    if (hasBias) state.bias = memory(plainDesc(call.in[2].shape, type), engine(), nullptr);
    return state;
  });
  s.src->run(s.stream, call.in[0].data, false);
  s.weights->run(s.stream, call.in[1].data, false);
  s.dst->plain.set_data_handle(call.out[0].data);
  std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, s.src->internal},
                                                {DNNL_ARG_WEIGHTS, s.weights->internal},
                                                {DNNL_ARG_DST, s.dst->internal}};
  if (hasBias) {
    s.bias.set_data_handle(call.in[2].data);
    args[DNNL_ARG_BIAS] = s.bias;
  }
  s.conv.execute(s.stream, args);
  s.dst->run(s.stream, call.out[0].data, true);
  s.stream.wait();
}

}  // namespace spmd::runtime::cpu
