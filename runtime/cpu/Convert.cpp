// CPU convert. f32 <-> bf16, the roundings and widenings around every op of a bf16 step
// (passes/WidenBf16.cpp), run as loops compiled for AVX-512, AVX2 and the baseline and split over
// the replica's OpenMP threads; the rounding is runtime/base/BFloat16.h's, integer arithmetic, so
// every ISA copy (OwnIsa.h) gives its bits. The buffer is read as it lies: the input and the result share a
// layout (plain or blocked, spmd-assign-layouts), so element i of one is element i of the other.
// Other pairs of types run the kernel library's loop (runtime/kernels/Convert.h).
#include <algorithm>

#include "runtime/base/BFloat16.h"
#include "runtime/cpu/HostLoop.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/device/WidenedBf16.h"
#include "runtime/kernels/Convert.h"

namespace spmd::runtime::cpu {
namespace {

constexpr int64_t kGrain = 1 << 15;  // elements per OpenMP iteration

SPMD_ISA_BODY void narrowRange(const float* __restrict x, bf16* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = toBf16(x[i]);
}

SPMD_ISA_BODY void widenRange(const bf16* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fromBf16(x[i]);
}

SPMD_ISA_BODY void roundRange(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = roundToBf16(x[i]);
}

template <typename In, typename Out, void (*range)(const In*, Out*, int64_t)>
void chunkedRange(const In* x, Out* y, int64_t n) {
  const int64_t chunks = (n + kGrain - 1) / kGrain;
#pragma omp parallel for if (chunks > 1) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) onOwnIsa<range>(x + c * kGrain, y + c * kGrain, std::min(kGrain, n - c * kGrain));
}

void widenBf16s(const bf16* from, float* to, int64_t count) { chunkedRange<bf16, float, widenRange>(from, to, count); }

void narrowToBf16s(const float* from, bf16* to, int64_t count) { chunkedRange<float, bf16, narrowRange>(from, to, count); }

}  // namespace

void widenBf16Values(const bf16* x, float* y, int64_t n) { onOwnIsa<widenRange>(x, y, n); }
void narrowToBf16Values(const float* x, bf16* y, int64_t n) { onOwnIsa<narrowRange>(x, y, n); }
void roundToBf16Values(const float* x, float* y, int64_t n) { onOwnIsa<roundRange>(x, y, n); }

void widenedOnCpu(KernelCall& call, KernelFn f32) { widenedBf16(call, f32, &widenBf16s, &narrowToBf16s); }

void convert(KernelCall& call) {
  const DType from = call.in[0].dtype, to = call.out[0].dtype;
  if (from == DType::f32 && to == DType::bf16) return narrowToBf16s(call.in[0].as<float>(), call.out[0].as<bf16>(), call.out[0].numel());
  if (from == DType::bf16 && to == DType::f32) return widenBf16s(call.in[0].as<bf16>(), call.out[0].as<float>(), call.out[0].numel());
  kernels::convert<HostLoop>(call);
}

}  // namespace spmd::runtime::cpu
