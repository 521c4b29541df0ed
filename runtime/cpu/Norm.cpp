// CPU batch norm: oneDNN batch normalization (f32) in training form (batch statistics out) and
// inference form (given statistics); f64 runs the reference loops.
#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::cpu {
namespace {

Prepared prepareBatchNorm(KernelCall& call, bool training) {
  using namespace dnnl;
  auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  if (!training) flags = flags | normalization_flags::use_global_stats;
  auto data = plainDesc(call.in[0].shape);
  batch_normalization_forward::desc desc(
      training ? prop_kind::forward_training : prop_kind::forward_inference, data,
      static_cast<float>(call.step.real("epsilon")), flags);
  Prepared p{batch_normalization_forward(
                 batch_normalization_forward::primitive_desc(desc, engine())),
             stream(engine()), {}};
  p.bind(DNNL_ARG_SRC, data);
  p.bind(DNNL_ARG_DST, data);
  for (int arg : {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE})
    p.bind(arg, call.in[1]);
  return p;
}

}  // namespace

void batch_norm_train(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_train(call);
  Prepared& p = cachedState<Prepared>(call, [&] { return prepareBatchNorm(call, true); });
  p.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
         {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_DST, call.out[0].data},
         {DNNL_ARG_MEAN, call.out[1].data}, {DNNL_ARG_VARIANCE, call.out[2].data}});
}

void batch_norm_infer(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_infer(call);
  Prepared& p = cachedState<Prepared>(call, [&] { return prepareBatchNorm(call, false); });
  p.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
         {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_MEAN, call.in[3].data},
         {DNNL_ARG_VARIANCE, call.in[4].data}, {DNNL_ARG_DST, call.out[0].data}});
}

// inputs: result_grad, input, scale, batch_mean, batch_variance;
// outputs: input_grad, scale_grad, offset_grad.
void batch_norm_train_backward(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_train_backward(call);
  Prepared& p = cachedState<Prepared>(call, [&] {
    using namespace dnnl;
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    auto data = plainDesc(call.in[1].shape);
    float epsilon = static_cast<float>(call.step.real("epsilon"));
    batch_normalization_forward::primitive_desc hint(
        {prop_kind::forward_training, data, epsilon, flags}, engine());
    batch_normalization_backward::desc desc(prop_kind::backward, data, data, epsilon, flags);
    Prepared prepared{batch_normalization_backward(
                          batch_normalization_backward::primitive_desc(desc, engine(), hint)),
                      stream(engine()), {}};
    for (int arg : {DNNL_ARG_DIFF_DST, DNNL_ARG_SRC, DNNL_ARG_DIFF_SRC}) prepared.bind(arg, data);
    for (int arg : {DNNL_ARG_SCALE, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_SCALE,
                    DNNL_ARG_DIFF_SHIFT})
      prepared.bind(arg, call.in[2]);
    // oneDNN 2.6 insists on a shift argument with use_shift, though dx does not depend on it.
    prepared.args[DNNL_ARG_SHIFT] = memory(plainDesc(call.in[2].shape), engine());
    return prepared;
  });
  p.run({{DNNL_ARG_DIFF_DST, call.in[0].data}, {DNNL_ARG_SRC, call.in[1].data},
         {DNNL_ARG_SCALE, call.in[2].data}, {DNNL_ARG_MEAN, call.in[3].data},
         {DNNL_ARG_VARIANCE, call.in[4].data}, {DNNL_ARG_DIFF_SRC, call.out[0].data},
         {DNNL_ARG_DIFF_SCALE, call.out[1].data}, {DNNL_ARG_DIFF_SHIFT, call.out[2].data}});
}

}  // namespace spmd::runtime::cpu
