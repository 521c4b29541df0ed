// Filter gradient of a 3x3 convolution of a one-channel input, dy in nChw<B>c:
//   dw[o][0][kh][kw] = sum over n, oh, ow of dy[n][o][oh][ow] * x[n][0][oh * s - p + kh][ow * s - p + kw]
// Each image is copied into a zero-bordered plane (so no tap needs a bounds check); for each
// block of B output channels, one pass over the image's output pixels adds dy's B lanes times
// the pixel's nine inputs into 9 x B sums.
#include "runtime/cpu/SingleChannelConv.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/cpu/BlockedLoops.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime::cpu::single_channel {
namespace {

struct Geometry {
  int64_t N, H, W, O, OH, OW, stride, pad;
  int64_t planeH() const { return H + 2 * pad; }
  int64_t planeW() const { return W + 2 * pad; }
};

// out[ob][t][l]: image n's sums for output channel ob * B + l and tap t, in pixel order. C of
// the B lanes at a time are one vector, nine of them (one a tap) held in registers over the
// image's pixels: C is the ISA's register width (16 floats on AVX-512, 8 on AVX2, 4 otherwise),
// so that the nine sums never spill. Each lane adds its products in pixel order, multiply then
// add (no contraction), whatever C is, so every ISA gives the same bits.
template <int B, int C>
SPMD_ISA_BODY
void imageSums(const float* plane, const float* dy, int64_t OB, int64_t OH, int64_t OW, int64_t PW, int64_t s,
               float* out) {
  typedef float Lanes __attribute__((vector_size(C * sizeof(float))));
  for (int64_t ob = 0; ob < OB; ++ob)
    for (int c = 0; c < B; c += C) {
      Lanes acc[9] = {};
      const float* grad = dy + ob * OH * OW * B + c;
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          Lanes d;
          std::memcpy(&d, grad + (oh * OW + ow) * B, sizeof d);
          const float* window = plane + oh * s * PW + ow * s;
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw) acc[kh * 3 + kw] += d * window[kh * PW + kw];
        }
      for (int t = 0; t < 9; ++t) std::memcpy(out + (ob * 9 + t) * B + c, &acc[t], sizeof(Lanes));
    }
}

template <int B>
void run(const float* x, const float* dy, const Geometry& g, float* dw) {
  const int64_t OB = g.O / B, PH = g.planeH(), PW = g.planeW(), perImage = g.O * 9;
  float* partial = threadScratch(0, g.N * perImage);
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < g.N; ++n) {
    float* plane = threadScratch(1, PH * PW);  // this thread's
    std::fill_n(plane, PH * PW, 0.0f);
    for (int64_t h = 0; h < g.H; ++h)
      std::memcpy(plane + (h + g.pad) * PW + g.pad, x + (n * g.H + h) * g.W, sizeof(float) * g.W);
    onOwnIsaEach<imageSums<B, (B < 16 ? B : 16)>, imageSums<B, 8>, imageSums<B, 4>>(
        plane, dy + n * g.O * g.OH * g.OW, OB, g.OH, g.OW, PW, g.stride, partial + n * perImage);
  }
  for (int64_t ob = 0; ob < OB; ++ob)
    for (int t = 0; t < 9; ++t)
      for (int l = 0; l < B; ++l) {
        double sum = 0;
        for (int64_t n = 0; n < g.N; ++n) sum += partial[n * perImage + (ob * 9 + t) * B + l];
        dw[(ob * B + l) * 9 + t] = static_cast<float>(sum);
      }
}

}  // namespace

bool runs(const KernelCall& call) {
  if (call.in.size() != 2 || call.out.size() != 1) return false;
  const TensorView &x = call.in[0], &dy = call.in[1], &dw = call.out[0];
  if (x.dtype != DType::f32 || x.rank() != 4 || dy.rank() != 4 || dw.rank() != 4) return false;
  const int64_t block = channelBlock(dy.layout);
  if (!x.layout.empty() || (block != 8 && block != 16) || dy.dim(1) % block) return false;
  if (x.dim(1) != 1 || dw.dim(0) != dy.dim(1) || dw.dim(1) != 1 || dw.dim(2) != 3 || dw.dim(3) != 3) return false;
  const auto& stride = convAttrs(call.step).stride;
  const auto& padding = convAttrs(call.step).padding;
  if (stride.size() != 2 || stride[0] != stride[1] || stride[0] < 1 || padding.size() != 2 ||
      padding[0] != padding[1] || padding[0] < 0 || padding[0] > 2)
    return false;
  const int64_t s = stride[0], p = padding[0];
  return dy.dim(0) == x.dim(0) && dy.dim(2) == (x.dim(2) + 2 * p - 3) / s + 1 &&
         dy.dim(3) == (x.dim(3) + 2 * p - 3) / s + 1 && dy.dim(2) > 0 && dy.dim(3) > 0;
}

void backwardFilter(KernelCall& call) {
  const TensorView &x = call.in[0], &dy = call.in[1];
  const Geometry g{x.dim(0),  x.dim(2),  x.dim(3),  dy.dim(1), dy.dim(2),
                   dy.dim(3), convAttrs(call.step).stride[0], convAttrs(call.step).padding[0]};
  if (channelBlock(dy.layout) == 16) run<16>(x.as<const float>(), dy.as<const float>(), g, call.out[0].as<float>());
  else run<8>(x.as<const float>(), dy.as<const float>(), g, call.out[0].as<float>());
}

}  // namespace spmd::runtime::cpu::single_channel
