// oneDNN engine and helpers shared by the CPU kernels.
#include "runtime/cpu/Onednn.h"

#include "runtime/cpu/CpuDevice.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime::cpu {

dnnl::engine& engine() {
  static dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

dnnl::memory::desc plainDesc(std::span<const int64_t> shape) {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::dims dims(shape.begin(), shape.end());
  switch (shape.size()) {
    case 1: return {dims, dnnl::memory::data_type::f32, tag::a};
    case 2: return {dims, dnnl::memory::data_type::f32, tag::ab};
    case 4: return {dims, dnnl::memory::data_type::f32, tag::abcd};
    default: throw Error("oneDNN kernels take rank 1, 2 or 4 tensors, got " + shapeString(shape));
  }
}

dnnl::memory::desc layoutDesc(const TensorView& view) {
  using tag = dnnl::memory::format_tag;
  switch (channelBlock(view.layout)) {
    case 0: return plainDesc(view.shape);
    case 8: return {dnnl::memory::dims(view.shape.begin(), view.shape.end()), dnnl::memory::data_type::f32, tag::nChw8c};
    default: return {dnnl::memory::dims(view.shape.begin(), view.shape.end()), dnnl::memory::data_type::f32, tag::nChw16c};
  }
}

int64_t preferredChannelBlock() {
  static const int64_t block = [] {
    // A mid-network 3x3 convolution (64 -> 64 channels): the layout oneDNN picks for its output.
    const std::vector<int64_t> act = {8, 64, 14, 14}, filter = {64, 64, 3, 3};
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                         anyDesc(act), anyDesc(filter), anyDesc(act), {1, 1}, {1, 1}, {1, 1});
    dnnl::memory::desc chosen = dnnl::convolution_forward::primitive_desc(desc, engine()).dst_desc();
    for (int64_t b : {8, 16})
      if (chosen == layoutDesc({nullptr, DType::f32, act, b == 8 ? "nChw8c" : "nChw16c"})) return b;
    return int64_t{0};
  }();
  return block;
}

void Prepared::run(std::initializer_list<std::pair<int, void*>> pointers) {
  for (auto [arg, pointer] : pointers) args.at(arg).set_data_handle(pointer);
  primitive.execute(stream, args);
  stream.wait();
}


Prepared preparedMatmul(const dnnl::memory::desc& src, const dnnl::memory::desc& weights,
                        const dnnl::memory::desc& dst, bool accumulate) {
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops sum;
    sum.append_sum(1.f);
    attr.set_post_ops(sum);
  }
  Prepared p{dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, weights, dst), attr, engine())),
             dnnl::stream(engine()), {}};
  p.bind(DNNL_ARG_SRC, src);
  p.bind(DNNL_ARG_WEIGHTS, weights);
  p.bind(DNNL_ARG_DST, dst);
  return p;
}

dnnl::memory::desc anyDesc(std::span<const int64_t> shape) {
  return {dnnl::memory::dims(shape.begin(), shape.end()), dnnl::memory::data_type::f32,
          dnnl::memory::format_tag::any};
}

ConvGeometry::ConvGeometry(const Step& step) {
  const auto& stride = step.ints("stride");
  const auto& pad = step.ints("padding");
  strides.assign(stride.begin(), stride.end());
  padding.assign(pad.begin(), pad.end());
}

}  // namespace spmd::runtime::cpu

namespace spmd::runtime {
int64_t CpuDevice::channelBlock() const { return cpu::preferredChannelBlock(); }
}  // namespace spmd::runtime
