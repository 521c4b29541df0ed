// CPU conv2d: oneDNN convolution (f32, NCHW/OIHW); f64 runs the reference loops (oneDNN has no f64).
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::cpu {

void conv2d(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::conv2d(call);
  bool hasBias = call.in.size() > 2;
  Prepared& p = cachedState<Prepared>(call, [&] {
    using namespace dnnl;
    const auto& stride = call.step.ints("stride");
    const auto& pad = call.step.ints("padding");
    memory::dims strides(stride.begin(), stride.end()), padding(pad.begin(), pad.end());
    auto src = plainDesc(call.in[0].shape), wei = plainDesc(call.in[1].shape),
         dst = plainDesc(call.out[0].shape);
    auto desc = hasBias ? convolution_forward::desc(prop_kind::forward_training,
                                                    algorithm::convolution_direct, src, wei,
                                                    plainDesc(call.in[2].shape), dst, strides,
                                                    padding, padding)
                        : convolution_forward::desc(prop_kind::forward_training,
                                                    algorithm::convolution_direct, src, wei, dst,
                                                    strides, padding, padding);
    Prepared prepared{convolution_forward(convolution_forward::primitive_desc(desc, engine())),
                      stream(engine()), {}};
    prepared.bind(DNNL_ARG_SRC, src);
    prepared.bind(DNNL_ARG_WEIGHTS, wei);
    prepared.bind(DNNL_ARG_DST, dst);
    if (hasBias) prepared.bind(DNNL_ARG_BIAS, call.in[2]);
    return prepared;
  });
  if (hasBias)
    p.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_WEIGHTS, call.in[1].data},
           {DNNL_ARG_BIAS, call.in[2].data}, {DNNL_ARG_DST, call.out[0].data}});
  else
    p.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_WEIGHTS, call.in[1].data},
           {DNNL_ARG_DST, call.out[0].data}});
}

}  // namespace spmd::runtime::cpu
