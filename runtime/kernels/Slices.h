// Two-stage reductions over few outputs with many elements each (a BatchNorm channel, a bias
// gradient): stage 1 runs one block per (output, slice), each summing its slice of the output's
// elements in a double per thread and the block's tree (blockSum); stage 2 folds an output's
// slices in slice order. How many slices an output gets depends on its element count alone, and
// the block size is fixed, so every GPU, launch and simulator seed gives the same bits. Before,
// one block per output did all of it: 64 blocks on a 132-SM H100 for the first BatchNorms.
#pragma once

#include <cstdint>

#include "runtime/kernels/Common.h"
#include "runtime/kernels/Launch.h"

namespace spmd::runtime::kernels {

// A stage-1 block takes at least this many elements (32 per thread); an output at most
// kMaxSlices slices.
constexpr int64_t kSliceElements = 8192;
constexpr int64_t kMaxSlices = 128;

struct Slices {
  int64_t count = 0;   // elements per output
  int64_t slices = 1;  // stage-1 blocks per output
  int64_t per = 0;     // elements per slice (the last may have fewer)
  SPMD_HOST_DEVICE int64_t begin(int64_t s) const { return s * per; }
  SPMD_HOST_DEVICE int64_t end(int64_t s) const { return (s + 1) * per < count ? (s + 1) * per : count; }
};

inline Slices slicesOf(int64_t count) {
  int64_t slices = (count + kSliceElements - 1) / kSliceElements;
  slices = slices < 1 ? 1 : slices > kMaxSlices ? kMaxSlices : slices;
  const int64_t per = (count + slices - 1) / slices;
  return {count, per > 0 ? (count + per - 1) / per : 1, per};
}

// Stage 1's grid: `outputs` x slices blocks of kBlockTreeThreads, `values` doubles of tree each.
inline Launch sliceLaunch(const char* kernel, int64_t outputs, const Slices& s, int64_t elements) {
  return {kernel, outputs * s.slices, kBlockTreeThreads, 0, kBlockTreeThreads * sizeof(double), elements, true, true};
}

// Walks elements k0, k0 + step, ... of one channel of x viewed as [outer, channels, inner]
// (element k is row k / inner, position k % inner) without dividing per element.
struct ChannelCursor {
  int64_t row, at, stepRows, stepRest, inner;
  SPMD_HOST_DEVICE ChannelCursor(int64_t k0, int64_t step, int64_t inner_)
      : row(k0 / inner_), at(k0 % inner_), stepRows(step / inner_), stepRest(step % inner_), inner(inner_) {}
  SPMD_HOST_DEVICE void advance() {
    row += stepRows, at += stepRest;
    if (at >= inner) at -= inner, ++row;
  }
  SPMD_HOST_DEVICE int64_t offset(int64_t channel, int64_t channels) const { return (row * channels + channel) * inner + at; }
};

}  // namespace spmd::runtime::kernels
