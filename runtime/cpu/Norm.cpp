// CPU batch norm: oneDNN batch normalization (f32) in training form (batch statistics out) and
// inference form (given statistics); f64 runs the reference loops. oneDNN normalizes in the
// layout of the data input (plain NCHW, or the blocked layout spmd-assign-layouts gave it); a
// gradient or result buffer in another layout is reordered around the call.
#include <vector>

#include "runtime/cpu/Onednn.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/device/Layouts.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::cpu {
namespace {

// A prepared primitive plus reorders for the data-shaped buffers not in the data input's layout.
struct NormState {
  Prepared p;
  std::unordered_map<int, Relayout> relaid;  // by DNNL_ARG_*

  // Binds `arg` to `view`'s buffer, through a reorder when its layout is not `data`'s.
  void bindData(int arg, const TensorView& view, const dnnl::memory::desc& data, bool isOutput) {
    p.bind(arg, data);
    if (layoutDesc(view) == data) return;
    auto [it, _] = relaid.emplace(arg, Relayout(layoutDesc(view), data, isOutput));
    p.args[arg] = it->second.internal;
  }

  void run(std::initializer_list<std::pair<int, void*>> pointers) {
    std::vector<std::pair<int, void*>> direct;
    for (auto [arg, pointer] : pointers)
      if (auto it = relaid.find(arg); it == relaid.end()) direct.emplace_back(arg, pointer);
      else if (arg != DNNL_ARG_DST && arg != DNNL_ARG_DIFF_SRC) it->second.run(p.stream, pointer, false);
    for (auto [arg, pointer] : direct) p.args.at(arg).set_data_handle(pointer);
    p.primitive.execute(p.stream, p.args);
    for (auto [arg, pointer] : pointers)
      if (auto it = relaid.find(arg); it != relaid.end() && (arg == DNNL_ARG_DST || arg == DNNL_ARG_DIFF_SRC))
        it->second.run(p.stream, pointer, true);
    p.stream.wait();
  }
};

// Per-channel mean and biased variance of an nChw<B>c tensor, two passes accumulating in double.
// oneDNN's blocked batch norm sums in f32 lanes, which loses digits on activations whose mean is
// far from zero (8x the plain kernel's error, enough to move ResNet-18's f32 gradients off
// PyTorch's by 0.4%); these statistics then feed oneDNN's normalization as given statistics.
void blockedStatistics(const TensorView& x, int64_t block, float* mean, float* variance) {
  const int64_t N = x.dim(0), C = x.dim(1), HW = x.dim(2) * x.dim(3), blocks = C / block;
  const double count = double(N * HW);
  const float* data = x.as<float>();
#pragma omp parallel for
  for (int64_t cb = 0; cb < blocks; ++cb) {
    std::vector<double> sum(block, 0.0), square(block, 0.0);
    for (int64_t n = 0; n < N; ++n) {
      const float* plane = data + (n * blocks + cb) * HW * block;
      for (int64_t i = 0; i < HW; ++i)
        for (int64_t l = 0; l < block; ++l) sum[l] += plane[i * block + l];
    }
    for (int64_t l = 0; l < block; ++l) sum[l] /= count;
    for (int64_t n = 0; n < N; ++n) {
      const float* plane = data + (n * blocks + cb) * HW * block;
      for (int64_t i = 0; i < HW; ++i)
        for (int64_t l = 0; l < block; ++l) {
          double d = plane[i * block + l] - sum[l];
          square[l] += d * d;
        }
    }
    for (int64_t l = 0; l < block; ++l) {
      mean[cb * block + l] = static_cast<float>(sum[l]);
      variance[cb * block + l] = static_cast<float>(square[l] / count);
    }
  }
}

NormState prepareBatchNorm(KernelCall& call, bool training) {
  using namespace dnnl;
  auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
  // Training on a blocked input: our statistics (blockedStatistics), then oneDNN normalizes.
  if (!training || channelBlock(call.in[0].layout)) flags = flags | normalization_flags::use_global_stats;
  auto data = layoutDesc(call.in[0]);
  batch_normalization_forward::desc desc(
      training ? prop_kind::forward_training : prop_kind::forward_inference, data,
      static_cast<float>(call.step.real("epsilon")), flags);
  NormState s{{batch_normalization_forward(batch_normalization_forward::primitive_desc(desc, engine())),
               stream(engine()), {}}, {}};
  s.p.bind(DNNL_ARG_SRC, data);
  s.bindData(DNNL_ARG_DST, call.out[0], data, true);
  for (int arg : {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE})
    s.p.bind(arg, call.in[1]);
  return s;
}

}  // namespace

void batch_norm_train(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_train(call);
  NormState& s = cachedState<NormState>(call, [&] { return prepareBatchNorm(call, true); });
  if (int64_t block = channelBlock(call.in[0].layout)) {
    blockedStatistics(call.in[0], block, call.out[1].as<float>(), call.out[2].as<float>());
    return s.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
                  {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_MEAN, call.out[1].data},
                  {DNNL_ARG_VARIANCE, call.out[2].data}, {DNNL_ARG_DST, call.out[0].data}});
  }
  s.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
         {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_DST, call.out[0].data},
         {DNNL_ARG_MEAN, call.out[1].data}, {DNNL_ARG_VARIANCE, call.out[2].data}});
}

void batch_norm_infer(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_infer(call);
  NormState& s = cachedState<NormState>(call, [&] { return prepareBatchNorm(call, false); });
  s.run({{DNNL_ARG_SRC, call.in[0].data}, {DNNL_ARG_SCALE, call.in[1].data},
         {DNNL_ARG_SHIFT, call.in[2].data}, {DNNL_ARG_MEAN, call.in[3].data},
         {DNNL_ARG_VARIANCE, call.in[4].data}, {DNNL_ARG_DST, call.out[0].data}});
}

// inputs: result_grad, input, scale, batch_mean, batch_variance;
// outputs: input_grad, scale_grad, offset_grad.
void batch_norm_train_backward(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::batch_norm_train_backward(call);
  NormState& s = cachedState<NormState>(call, [&] {
    using namespace dnnl;
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    auto data = layoutDesc(call.in[1]);
    float epsilon = static_cast<float>(call.step.real("epsilon"));
    batch_normalization_forward::primitive_desc hint(
        {prop_kind::forward_training, data, epsilon, flags}, engine());
    batch_normalization_backward::desc desc(prop_kind::backward, data, data, epsilon, flags);
    NormState state{{batch_normalization_backward(
                         batch_normalization_backward::primitive_desc(desc, engine(), hint)),
                     stream(engine()), {}}, {}};
    state.p.bind(DNNL_ARG_SRC, data);
    state.bindData(DNNL_ARG_DIFF_DST, call.in[0], data, false);
    state.bindData(DNNL_ARG_DIFF_SRC, call.out[0], data, true);
    for (int arg : {DNNL_ARG_SCALE, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_DIFF_SCALE,
                    DNNL_ARG_DIFF_SHIFT})
      state.p.bind(arg, call.in[2]);
    // oneDNN 2.6 insists on a shift argument with use_shift, though dx does not depend on it.
    state.p.args[DNNL_ARG_SHIFT] = memory(plainDesc(call.in[2].shape), engine());
    return state;
  });
  s.run({{DNNL_ARG_DIFF_DST, call.in[0].data}, {DNNL_ARG_SRC, call.in[1].data},
         {DNNL_ARG_SCALE, call.in[2].data}, {DNNL_ARG_MEAN, call.in[3].data},
         {DNNL_ARG_VARIANCE, call.in[4].data}, {DNNL_ARG_DIFF_SRC, call.out[0].data},
         {DNNL_ARG_DIFF_SCALE, call.out[1].data}, {DNNL_ARG_DIFF_SHIFT, call.out[2].data}});
}

}  // namespace spmd::runtime::cpu
