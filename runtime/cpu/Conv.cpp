// CPU conv2d: oneDNN convolution (f32). oneDNN picks its preferred (blocked) layouts; inputs
// are reordered into them and the result back to NCHW around the call, as PyTorch's mkldnn path
// does. f64 runs the reference loops (oneDNN has no f64).
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Onednn.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime::cpu {
namespace {

// A layout conversion between the user's plain buffer and oneDNN's preferred one; identity when
// they agree.
struct Relayout {
  dnnl::memory plain, internal;
  std::optional<dnnl::reorder> reorder;

  Relayout(const dnnl::memory::desc& plainDesc, const dnnl::memory::desc& preferred, bool toPlain) {
    plain = dnnl::memory(plainDesc, engine(), nullptr);
    if (plainDesc == preferred) {
      internal = plain;
      return;
    }
    internal = dnnl::memory(preferred, engine());
    reorder = toPlain ? dnnl::reorder(internal, plain) : dnnl::reorder(plain, internal);
  }
  void run(dnnl::stream& s, void* data, bool toPlain) {
    plain.set_data_handle(data);
    if (!reorder) return;
    if (toPlain) reorder->execute(s, internal, plain);
    else reorder->execute(s, plain, internal);
  }
};

struct ConvState {
  dnnl::convolution_forward conv;
  dnnl::stream stream;
  std::optional<Relayout> src, weights, dst;
  dnnl::memory bias;
};

}  // namespace

void conv2d(KernelCall& call) {
  if (call.in[0].dtype != DType::f32) return reference::conv2d(call);
  bool hasBias = call.in.size() > 2;
  ConvState& s = cachedState<ConvState>(call, [&] {
    using namespace dnnl;
    const auto& stride = call.step.ints("stride");
    const auto& pad = call.step.ints("padding");
    memory::dims strides(stride.begin(), stride.end()), padding(pad.begin(), pad.end());
    auto any = [](std::span<const int64_t> shape) {
      return memory::desc(memory::dims(shape.begin(), shape.end()), memory::data_type::f32,
                          memory::format_tag::any);
    };
    auto src = any(call.in[0].shape), wei = any(call.in[1].shape), dst = any(call.out[0].shape);
    auto desc = hasBias ? convolution_forward::desc(prop_kind::forward_training,
                                                    algorithm::convolution_direct, src, wei,
                                                    plainDesc(call.in[2].shape), dst, strides,
                                                    padding, padding)
                        : convolution_forward::desc(prop_kind::forward_training,
                                                    algorithm::convolution_direct, src, wei, dst,
                                                    strides, padding, padding);
    convolution_forward::primitive_desc pd(desc, engine());
    ConvState state{convolution_forward(pd), stream(engine()), {}, {}, {}, {}};
    state.src.emplace(plainDesc(call.in[0].shape), pd.src_desc(), false);
    state.weights.emplace(plainDesc(call.in[1].shape), pd.weights_desc(), false);
    state.dst.emplace(plainDesc(call.out[0].shape), pd.dst_desc(), true);
    if (hasBias) state.bias = memory(plainDesc(call.in[2].shape), engine(), nullptr);
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
