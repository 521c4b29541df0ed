// The simulator's kernel table: the kernel library through SimApi (the CUDA backend's own kernel
// code, block kernels included, run on the device's stream thread), then, for the ops the GPU
// hands to a library (cuDNN convolutions, cuBLAS matmul), the CPU backend's kernel queued on the
// stream thread, as the GPU would run its library call on its stream; a matmul's bias goes
// through the CUDA backend's own kernel, as there, and fused steps run the CUDA backend's
// generated kernels built for the host (sim/Fused.cpp). A convolution pinned to the CUDA
// backend's "gemm" variant (SPMD_KERNELS=conv2d:gemm, ...; kernels/ConvGemm.h) runs it here,
// with kernels::GemmFn standing in for cuBLAS and the batch in chunks of 16 KiB of scratch, so its
// unfolding, chunking and GEMM arguments are tested without a GPU; unpinned, a convolution is the CPU's, as cuDNN's stand-in.
#include <algorithm>
#include <span>

#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/kernels/ConvGemm.h"
#include "runtime/kernels/Dense.h"
#include "runtime/kernels/EmptySums.h"
#include "runtime/kernels/Library.h"
#include "runtime/sim/SimApi.h"
namespace spmd::runtime::sim {

void queueCpu(KernelCall& call, KernelFn cpu, std::vector<TensorView> in, std::vector<TensorView> out,
              std::shared_ptr<void>* cache) {
  const Step* step = &call.step;
  std::string* variant = call.variant;  // the executor's, which outlives the queued work
  deviceOf(call).enqueue(stepName(call), [cpu, in = std::move(in), out = std::move(out), step, cache, variant] {
    KernelCall cpuCall{*step, in, out, *cache, nullptr, nullptr, nullptr, nullptr, variant};
    cpu(cpuCall);
  });
  deviceOf(call).markKernel("the CPU's " + call.step.op + " (for a library kernel)");
}

namespace {

// The CPU kernel of the call's op, queued.
template <const char* Op>
void onStream(KernelCall& call) {
  static const KernelFn cpu = cpuKernels().at(Op).fn;
  queueCpu(call, cpu, {call.in.begin(), call.in.end()}, {call.out.begin(), call.out.end()}, &call.cache);
}

// matmul with a bias as the CUDA backend asks cuBLAS for it: the bias rows written by the CUDA
// backend's kernel (RowBiasFn), then the product, here the CPU's, added (beta = 1).
struct BiasedMatmul {
  std::shared_ptr<std::byte> product;
  std::shared_ptr<void> cpuCache;
};

void matmul(KernelCall& call) {
  if (kernels::emptySums<SimApi>(call)) return;  // as the cuda backend, before cuBLAS
  static const KernelFn cpu = cpuKernels().at("matmul").fn;
  // Unbiased, or bf16 (the CPU's bf16 matmul, or its f32 one between roundings, bias and all: one rounding).
  if (call.in.size() < 3 || call.in[0].dtype == DType::bf16)
    return queueCpu(call, cpu, {call.in.begin(), call.in.end()}, {call.out.begin(), call.out.end()}, &call.cache);
  const TensorView& y = call.out[0];
  if (!call.cache) {
    auto state = std::make_shared<BiasedMatmul>();
    state->product = SimApi::allocate(call, size_t(y.numel()) * dtypeSize(y.dtype));
    call.cache = state;
  }
  auto& state = *static_cast<BiasedMatmul*>(call.cache.get());
  TensorView product = y;
  product.data = state.product.get();
  queueCpu(call, cpu, {call.in[0], call.in[1]}, {product}, &state.cpuCache);
  visitFloat(y.dtype, [&](auto tag) {
    using T = decltype(tag);
    SimApi::forEach(call, y.numel(), kernels::RowBiasFn<T>{call.in[2].as<T>(), y.as<T>(), y.dim(y.rank() - 1)});
    SimApi::forEach(call, y.numel(), kernels::ProductAddFn<T>{product.as<T>(), y.as<T>()});
  });
}

#define SPMD_SIM_CPU_OPS(X)                                                                          \
  X(conv2d) X(conv2d_backward_data) X(conv2d_backward_filter)
#define SPMD_OP_NAME(name) constexpr char name##Name[] = #name;
SPMD_SIM_CPU_OPS(SPMD_OP_NAME)
#undef SPMD_OP_NAME

void gemm(KernelCall& call, const kernels::GemmArgs& g) {
  if (g.dtype == DType::bf16) return SimApi::forEach(call, g.m * g.n, kernels::GemmFn<bf16>{g});
  visitFloat(g.dtype, [&](auto tag) { SimApi::forEach(call, g.m * g.n, kernels::GemmFn<decltype(tag)>{g}); });
}

// The simulator's chunk of the batch for the GEMM variant: small, so that the kernel cases run in
// several chunks (a shorter last one included), as the GPU's large layers do.
constexpr size_t kConvGemmScratchBytes = size_t(16) << 10;

// A convolution with channels-last ("nhwc") operands, as cuDNN reads them: the CPU's kernel
// (plain and blocked layouts only) on plain copies, relaid by the kernel library's relayout
// before and after, all queued on the stream.
struct PlainCopies {
  std::vector<std::shared_ptr<std::byte>> buffers;  // one per channels-last view, in and out
  std::shared_ptr<void> cpuCache;
};

bool channelsLast(const KernelCall& call) {
  auto any = [](std::span<const TensorView> views) {
    return std::any_of(views.begin(), views.end(), [](const TensorView& v) { return v.layout == kChannelsLast; });
  };
  return any(call.in) || any(call.out);
}

void throughPlain(KernelCall& call, KernelFn cpu) {
  if (!call.cache) {
    auto state = std::make_shared<PlainCopies>();
    for (std::span<const TensorView> views : {std::span<const TensorView>(call.in), std::span<const TensorView>(call.out)})
      for (const TensorView& v : views)
        if (v.layout == kChannelsLast) state->buffers.push_back(SimApi::allocate(call, size_t(v.numel()) * dtypeSize(v.dtype)));
    call.cache = state;
  }
  auto& state = *static_cast<PlainCopies*>(call.cache.get());
  std::vector<TensorView> in(call.in.begin(), call.in.end()), out(call.out.begin(), call.out.end());
  size_t next = 0;
  auto plain = [&](TensorView& v) {
    if (v.layout != kChannelsLast) return false;
    v.layout = "", v.data = state.buffers.at(next++).get();
    return true;
  };
  for (size_t i = 0; i < in.size(); ++i)
    if (plain(in[i])) kernels::relayoutInto<SimApi>(call, call.in[i], in[i]);
  std::vector<size_t> relaid;
  for (size_t i = 0; i < out.size(); ++i)
    if (plain(out[i])) relaid.push_back(i);
  queueCpu(call, cpu, in, out, &state.cpuCache);
  for (size_t i : relaid) kernels::relayoutInto<SimApi>(call, out[i], call.out[i]);
}

// A convolution: the CPU's kernel, or the CUDA backend's GEMM variant where SPMD_KERNELS pins it
// (neither dilated nor grouped).
template <const char* Op>
void conv(KernelCall& call) {
  if (kernels::emptySums<SimApi>(call)) return;  // as the cuda backend, before cuDNN or its GEMM variant
  if (KernelChoices::process().pinOf(Op) != "gemm") {
    if (channelsLast(call)) return throughPlain(call, cpuKernels().at(Op).fn);
    return onStream<Op>(call);
  }
  kernels::ConvGeometry g;
  const DType dtype = call.out[0].dtype;
  if (dtype == DType::i32 || !kernels::convGeometryOf(call, &g))
    throw Error("SPMD_KERNELS pins " + call.step.op + " to 'gemm', which computes plain NCHW f32, f64 and bf16 "
                "convolutions (neither dilated nor grouped) of fewer than 2^31 elements a tensor; " + stepName(call) + " is " + std::string(dtypeName(dtype)) + " " +
                shapeString(Shape(call.out[0].shape.begin(), call.out[0].shape.end())) + "; unpin it on sim");
  const size_t sum = kernels::convGemmSumBytes(dtype);
  const uint32_t chunk = kernels::convGemmChunk(g, sum, kConvGemmScratchBytes);
  std::byte* scratch = kernels::scratch<SimApi>(call, kernels::convGemmScratchBytes(g, chunk, sum));
  kernels::convGemmOf<SimApi>(call, g, chunk, scratch, gemm);
  if (call.variant && call.variant->empty()) *call.variant = "gemm: pinned by SPMD_KERNELS";
}

}  // namespace
}  // namespace spmd::runtime::sim

namespace spmd::runtime {

const KernelTable& simKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    kernels::addLibrary<sim::SimApi>(t, "kernel library on the stream thread (runtime/kernels)");
    kernels::addBlockLibrary<sim::SimApi>(t, "kernel library's block kernels, emulated blocks (runtime/kernels)");
#define SPMD_ON_STREAM(name) \
  t[#name] = Kernel{&sim::onStream<sim::name##Name>, "the CPU backend's kernel on the stream thread", nullptr, cpuKernels().at(#name).variants};
    SPMD_SIM_CPU_OPS(SPMD_ON_STREAM)
#undef SPMD_ON_STREAM
#define SPMD_CONV(name)                                                                                  \
  t[#name] = Kernel{&sim::conv<sim::name##Name>, "the CPU backend's kernel on the stream thread, or pinned, " \
                    "the CUDA backend's GEMM variant (kernels/ConvGemm.h)", nullptr, cpuKernels().at(#name).variants};
    SPMD_CONV(conv2d) SPMD_CONV(conv2d_backward_data) SPMD_CONV(conv2d_backward_filter)
#undef SPMD_CONV
    t["fused"] = Kernel{&sim::fused, "the CUDA backend's generated kernel built for the host (sim/Fused.cpp)"};
    t["custom_call"] = Kernel{&sim::customCall, "the user's CUDA kernel built for the host and run in two orders, "
                                                "or their host kernel on the stream thread (sim/CustomCall.cpp)"};
    t["matmul"] = Kernel{&sim::matmul, "the CPU backend's GEMM on the stream thread, bias as on CUDA (kernels/Dense.h)"};
    return t;
  }();
  return table;
}

}  // namespace spmd::runtime
