// CPU conv2d gradients: the step's variant (runtime/cpu/CpuVariants.h), and oneDNN's direct
// backward data (input gradient) and backward weights (filter gradient), the variants for any
// shape, each in oneDNN's preferred layouts with reorders around the call where a buffer lies in
// another layout, like the forward kernel. bf16: oneDNN's bf16 primitives where the ISA has them
// (onednnBf16), else the f32 variants between roundings.
#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Onednn.h"

namespace spmd::runtime::cpu {
namespace {

// The forward convolution the backward primitives are derived from (oneDNN wants it as a hint).
dnnl::convolution_forward::primitive_desc forwardHint(std::span<const int64_t> src,
                                                      std::span<const int64_t> weights,
                                                      std::span<const int64_t> dst,
                                                      const ConvGeometry& g, DType type) {
  using namespace dnnl;
  convolution_forward::desc desc(prop_kind::forward_training, algorithm::convolution_direct,
                                 anyDesc(src, type), g.anyWeights(weights, type), anyDesc(dst, type),
                                 g.strides, g.dilates, g.padding, g.padding);
  return {desc, engine()};
}

// A backward primitive with two relaid inputs and one relaid output.
struct ConvBackwardState {
  dnnl::primitive primitive;
  dnnl::stream stream;
  int inArgs[2], outArg;
  std::optional<Relayout> in[2], out;

  void run(const KernelCall& call) {
    in[0]->run(stream, call.in[0].data, false);
    in[1]->run(stream, call.in[1].data, false);
    out->plain.set_data_handle(call.out[0].data);
    primitive.execute(stream, {{inArgs[0], in[0]->internal},
                               {inArgs[1], in[1]->internal},
                               {outArg, out->internal}});
    out->run(stream, call.out[0].data, true);
    stream.wait();
  }
};

}  // namespace

// inputs: result_grad, filter; output: input_grad
void conv2d_backward_data(KernelCall& call) {
  if (emptySums(call)) return;
  if (call.in[0].dtype == DType::bf16 && !onednnBf16()) return widenedOnCpu(call, &conv2d_backward_data);
  runVariant(call, cpuVariants(call.step.op));
}

void onednnConv2dBackwardData(KernelCall& call) {
  const DType type = call.in[0].dtype;
  auto& s = cachedState<ConvBackwardState>(call, [&] {
    using namespace dnnl;
    ConvGeometry g(call.step);
    const auto &dy = call.in[0].shape, &w = call.in[1].shape, &dx = call.out[0].shape;
    convolution_backward_data::desc desc(algorithm::convolution_direct, anyDesc(dx, type), g.anyWeights(w, type),
                                         anyDesc(dy, type), g.strides, g.dilates, g.padding, g.padding);
    convolution_backward_data::primitive_desc pd(desc, engine(), forwardHint(dx, w, dy, g, type));
    ConvBackwardState state{convolution_backward_data(pd), stream(engine()),
                            {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS}, DNNL_ARG_DIFF_SRC, {}, {}};
    state.in[0].emplace(layoutDesc(call.in[0]), pd.diff_dst_desc(), false);
    state.in[1].emplace(g.plainWeights(w, type), pd.weights_desc(), false);
    state.out.emplace(layoutDesc(call.out[0]), pd.diff_src_desc(), true);
    return state;
  });
  s.run(call);
}

// inputs: input, result_grad; output: filter_grad
void conv2d_backward_filter(KernelCall& call) {
  if (emptySums(call)) return;
  if (call.in[0].dtype == DType::bf16 && !onednnBf16()) return widenedOnCpu(call, &conv2d_backward_filter);
  runVariant(call, cpuVariants(call.step.op));
}

void onednnConv2dBackwardFilter(KernelCall& call) {
  const DType type = call.in[0].dtype;
  auto& s = cachedState<ConvBackwardState>(call, [&] {
    using namespace dnnl;
    ConvGeometry g(call.step);
    const auto &x = call.in[0].shape, &dy = call.in[1].shape, &dw = call.out[0].shape;
    convolution_backward_weights::desc desc(algorithm::convolution_direct, anyDesc(x, type),
                                            g.anyWeights(dw, type), anyDesc(dy, type), g.strides, g.dilates,
                                            g.padding, g.padding);
    convolution_backward_weights::primitive_desc pd(desc, engine(), forwardHint(x, dw, dy, g, type));
    ConvBackwardState state{convolution_backward_weights(pd), stream(engine()),
                            {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST}, DNNL_ARG_DIFF_WEIGHTS, {}, {}};
    state.in[0].emplace(layoutDesc(call.in[0]), pd.src_desc(), false);
    state.in[1].emplace(layoutDesc(call.in[1]), pd.diff_dst_desc(), false);
    state.out.emplace(g.plainWeights(dw, type), pd.diff_weights_desc(), true);
    return state;
  });
  s.run(call);
}

}  // namespace spmd::runtime::cpu
