// Convolutions and matmuls over nothing (runtime/cpu/Kernels.h: emptySums). A call whose outputs
// hold no element has nothing to do, and one whose sums run over an empty extent (a filter
// gradient of a batch of 0 images, a matmul with K = 0, a convolution of 0 input channels or of an
// input that is all padding) writes the empty sum: zeros, plus the bias where the op adds one.
// Neither reaches the variants (oneDNN's primitives refuse empty tensors; the timing would time
// nothing, and the sliced variants divided by the empty extent).
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "runtime/cpu/Kernels.h"
#include "runtime/kernels/EmptySums.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime::cpu {

namespace {

bool holdsNothing(const TensorView& t) { return t.numel() == 0; }

}  // namespace

bool overNothing(const KernelCall& call) { return kernels::sumsOverNothing(call); }

bool emptySums(KernelCall& call) {
  if (!overNothing(call)) return false;
  if (std::all_of(call.out.begin(), call.out.end(), holdsNothing)) return true;
  const TensorView& y = call.out[0];
  const size_t size = dtypeSize(y.dtype);
  std::memset(y.data, 0, size_t(y.numel()) * size);
  if (call.in.size() < 3) return true;
  // y = the bias along its channels: a matmul's last dimension, a convolution's dimension 1 in its
  // layout (plain, nChw<B>c or nhwc: innerBlock's channels innermost).
  const TensorView& bias = call.in[2];
  const int64_t channels = bias.numel();
  const bool conv = y.rank() == 4 && call.step.op == "conv2d";
  const int64_t inner = conv ? innerBlock(y.layout, channels) : channels;
  const int64_t pixels = conv ? y.dim(2) * y.dim(3) : 1;
  const auto* from = static_cast<const std::byte*>(bias.data);
  auto* to = static_cast<std::byte*>(y.data);
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t channel = inner == 0 ? (i / pixels) % channels
                                       : ((i / (pixels * inner)) % (channels / inner)) * inner + i % inner;
    std::memcpy(to + size_t(i) * size, from + size_t(channel) * size, size);
  }
  return true;
}

}  // namespace spmd::runtime::cpu
