// oneDNN engine and helpers shared by the CPU kernels.
#include "runtime/cpu/Onednn.h"

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

void Prepared::run(std::initializer_list<std::pair<int, void*>> pointers) {
  for (auto [arg, pointer] : pointers) args.at(arg).set_data_handle(pointer);
  primitive.execute(stream, args);
  stream.wait();
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
