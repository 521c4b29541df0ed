// The loops of cpu/OwnGelu.h's functions, one copy per ISA (OwnIsa.h). Each call runs on the
// calling thread: the kernels split their work across the OpenMP pool before calling.
#include "runtime/cpu/OwnGelu.h"

namespace spmd::runtime::cpu {
namespace {

SPMD_ISA_BODY void gelus(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ownGelu(x[i]);
}

SPMD_ISA_BODY void geluBackwards(const float* g, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = ownGeluBackward(g[i], x[i]);
}

SPMD_ISA_BODY void erfcs(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float e = float(erfcForF32(x[i]));
    y[i] = x[i] == x[i] ? e : x[i];
  }
}

}  // namespace

void ownGeluValues(const float* x, float* y, int64_t n) { onOwnIsa<gelus>(x, y, n); }
void ownGeluBackwardValues(const float* g, const float* x, float* y, int64_t n) { onOwnIsa<geluBackwards>(g, x, y, n); }
void ownErfcValues(const float* x, float* y, int64_t n) { onOwnIsa<erfcs>(x, y, n); }

}  // namespace spmd::runtime::cpu
