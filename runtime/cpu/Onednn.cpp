// oneDNN engine and helpers shared by the CPU kernels.
#include "runtime/cpu/Onednn.h"

#include "runtime/cpu/CpuDevice.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu {

dnnl::engine& engine() {
  static dnnl::engine instance(dnnl::engine::kind::cpu, 0);
  return instance;
}

dnnl::memory::data_type dnnlType(DType dtype) {
  if (dtype == DType::f32) return dnnl::memory::data_type::f32;
  if (dtype == DType::bf16) return dnnl::memory::data_type::bf16;
  throw Error("oneDNN kernels take f32 or bf16 tensors, got " + std::string(dtypeName(dtype)));
}

dnnl::memory::desc plainDesc(std::span<const int64_t> shape, DType dtype) {
  using tag = dnnl::memory::format_tag;
  dnnl::memory::dims dims(shape.begin(), shape.end());
  const auto type = dnnlType(dtype);
  switch (shape.size()) {
    case 1: return {dims, type, tag::a};
    case 2: return {dims, type, tag::ab};
    case 4: return {dims, type, tag::abcd};
    default: throw Error("oneDNN kernels take rank 1, 2 or 4 tensors, got " + shapeString(shape));
  }
}

dnnl::memory::desc layoutDesc(const TensorView& view) {
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::dims dims(view.shape.begin(), view.shape.end());
  switch (channelBlock(view.layout)) {
    case 0: return plainDesc(view.shape, view.dtype);
    case 8: return {dims, dnnlType(view.dtype), tag::nChw8c};
    default: return {dims, dnnlType(view.dtype), tag::nChw16c};
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

dnnl::memory::desc anyDesc(std::span<const int64_t> shape, DType dtype) {
  return {dnnl::memory::dims(shape.begin(), shape.end()), dnnlType(dtype), dnnl::memory::format_tag::any};
}

namespace {

struct Bf16Support {
  bool native = false;
  std::string path;
};

const Bf16Support& bf16Support() {
  static const Bf16Support support = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16Isa = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    const bool amx = (isa & static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx)) ==
                     static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);
    const std::string emulated = "emulated: the f32 kernels between bf16 roundings (";
    if ((isa & bf16Isa) != bf16Isa)
      return Bf16Support{false, emulated + "oneDNN's effective ISA has no AVX512-BF16 or AMX)"};
    try {  // the two primitives the bf16 kernels make, on a small shape
      const std::vector<int64_t> act = {2, 16, 6, 6}, filter = {16, 16, 3, 3}, a = {4, 8}, b = {8, 4}, c = {4, 4};
      dnnl::convolution_forward::desc conv(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                           anyDesc(act, DType::bf16), anyDesc(filter, DType::bf16),
                                           anyDesc(act, DType::bf16), {1, 1}, {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc(conv, engine());
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(plainDesc(a, DType::bf16), plainDesc(b, DType::bf16),
                                                      plainDesc(c, DType::bf16)),
                                   engine());
    } catch (const dnnl::error& e) {
      return Bf16Support{false, emulated + "oneDNN refused a bf16 primitive: " + e.what() + ")"};
    }
    return Bf16Support{true, std::string("oneDNN's bf16 kernels (") + (amx ? "AMX" : "AVX512-BF16") + ")"};
  }();
  return support;
}

}  // namespace

bool onednnBf16() { return bf16Support().native; }
const std::string& onednnBf16Path() { return bf16Support().path; }

ConvGeometry::ConvGeometry(const Step& step) {
  const ConvView attrs = convAttrs(step);
  strides.assign(attrs.stride.begin(), attrs.stride.end());
  padding.assign(attrs.padding.begin(), attrs.padding.end());
  dilates = {attrs.dilation[0] - 1, attrs.dilation[1] - 1};
  groups = attrs.groups;
}

dnnl::memory::dims ConvGeometry::weights(std::span<const int64_t> filter) const {
  if (groups == 1) return dnnl::memory::dims(filter.begin(), filter.end());
  return {groups, filter[0] / groups, filter[1], filter[2], filter[3]};
}

dnnl::memory::desc ConvGeometry::plainWeights(std::span<const int64_t> filter, DType dtype) const {
  if (groups == 1) return plainDesc(filter, dtype);
  return {weights(filter), dnnlType(dtype), dnnl::memory::format_tag::goihw};
}

dnnl::memory::desc ConvGeometry::anyWeights(std::span<const int64_t> filter, DType dtype) const {
  return {weights(filter), dnnlType(dtype), dnnl::memory::format_tag::any};
}

}  // namespace spmd::runtime::cpu

namespace spmd::runtime {
int64_t CpuDevice::channelBlock() const { return cpu::preferredChannelBlock(); }

bool CpuDevice::readsLayout(std::string_view layout) const {
  return layout.empty() || layout == "nChw8c" || layout == "nChw16c";
}
}  // namespace spmd::runtime
