// Memory layouts besides plain row-major, and which CPU kernels read and write them.
//
// A layout is named by its oneDNN format tag: "" is plain (row-major NCHW, what every host read,
// checkpoint and other backend sees); "nChw8c" / "nChw16c" hold an NCHW tensor with its channels
// in blocks of B innermost, element (n, c, h, w) at (((n*C/B + c/B)*H + h)*W + w)*B + c%B.
// A blocked value is only ever given to a tensor whose channels divide by B, so it has exactly
// the plain tensor's elements and bytes, permuted: the memory plan and elementwise kernels that
// read every operand at the same index do not change.
//
// The compiler's spmd-assign-layouts pass asks a BlockedLayouts where blocked values may flow;
// the CPU backend builds one with the block its oneDNN convolutions prefer on this machine's ISA
// (runtime/cpu/Onednn.cpp), the lit tests with a fixed block. Header-only: passes/ reads it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "runtime/base/Error.h"

namespace spmd::runtime {

// The channel block of `layout`: 0 for plain, B for "nChw<B>c"; throws naming any other layout.
inline int64_t channelBlock(std::string_view layout) {
  if (layout.empty()) return 0;
  if (layout == "nChw8c") return 8;
  if (layout == "nChw16c") return 16;
  throw Error("unknown tensor layout '" + std::string(layout) +
              "' (known: plain, nChw8c, nChw16c); was the program written by a newer spmd?");
}

// The offset of element (n, c, h, w) of an [N, C, H, W] tensor in the layout with channel block
// `block` (0: plain row-major).
inline int64_t blockedOffset(int64_t block, int64_t C, int64_t H, int64_t W, int64_t n, int64_t c,
                             int64_t h, int64_t w) {
  if (block == 0) return ((n * C + c) * H + h) * W + w;
  return (((n * (C / block) + c / block) * H + h) * W + w) * block + c % block;
}

class BlockedLayouts {
 public:
  // block: 8 or 16 (channels per block), or 0 for a backend without blocked layouts.
  explicit BlockedLayouts(int64_t block) : block_(block) {
    if (block != 0 && block != 8 && block != 16)
      throw Error("blocked layouts have 8 or 16 channels per block, not " + std::to_string(block));
  }
  int64_t block() const { return block_; }

  // The blocked layout for an f32 activation of `shape`: rank 4 [N, C, H, W] with C a multiple
  // of the block; "" (plain) for anything else.
  std::string blockedLayout(std::span<const int64_t> shape) const {
    if (block_ == 0 || shape.size() != 4 || shape[1] % block_ != 0) return "";
    return "nChw" + std::to_string(block_) + "c";
  }

  // Whether the kernel for `op` (a dialect op name) reads operand `index` in the blocked layout
  // (oneDNN takes it as it is instead of reordering); `axes` is the op's axes attribute.
  static bool readsBlocked(std::string_view op, int index, std::span<const int64_t> axes) {
    if (op == "conv2d") return index == 0;
    if (op == "conv2d_backward_data") return index == 0;            // the result's gradient
    if (op == "conv2d_backward_filter") return index == 0 || index == 1;  // input, result's gradient
    if (op == "batch_norm_train" || op == "batch_norm_infer") return index == 0;
    if (op == "batch_norm_train_backward") return index == 0 || index == 1;  // gradient, input
    // A per-channel sum (a convolution's bias gradient) reads the blocks as [N, C/B, H, W, B].
    if (op == "reduce_sum")
      return index == 0 && axes.size() == 3 && axes[0] == 0 && axes[1] == 2 && axes[2] == 3;
    return false;
  }
  // Whether the kernel for `op` can write result `index` in the blocked layout.
  static bool writesBlocked(std::string_view op, int index) {
    if (op == "conv2d" || op == "conv2d_backward_data" || op == "batch_norm_train" ||
        op == "batch_norm_infer" || op == "batch_norm_train_backward")
      return index == 0;
    return false;
  }

 private:
  int64_t block_;
};

}  // namespace spmd::runtime
