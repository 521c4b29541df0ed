// Memory layouts besides plain row-major, and which kernels read and write them.
//
// A layout is named by its oneDNN format tag: "" is plain (row-major NCHW, what every host read,
// checkpoint and other backend sees); "nChw8c" / "nChw16c" hold an NCHW tensor with its channels
// in blocks of B innermost, element (n, c, h, w) at (((n*C/B + c/B)*H + h)*W + w)*B + c%B (the
// CPU backend's, oneDNN's preferred layouts); "nhwc" holds it channels-last, element (n, c, h, w)
// at ((n*H + h)*W + w)*C + c: the block formula with B = C (the CUDA backend's, with
// SPMD_CHANNELS_LAST=1: cuDNN's tensor-core convolutions read it without transposing). A blocked
// value is only ever given to a tensor whose channels divide by B, so every layout holds exactly
// the plain tensor's elements and bytes, permuted: the memory plan and elementwise kernels that
// read every operand at the same index do not change.
//
// The compiler's spmd-assign-layouts pass asks a BlockedLayouts where such values may flow; the
// backend names the layout its kernels prefer (Driver::activationLayout: the CPU's block by its
// ISA, runtime/cpu/Onednn.cpp), the lit tests a fixed one. Header-only: passes/ reads it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/base/Shape.h"

namespace spmd::runtime {

inline constexpr const char* kChannelsLast = "nhwc";

// The channel block of `layout`: 0 for plain, B for "nChw<B>c" (the CPU kernels' layouts);
// throws naming any other layout, "nhwc" included (its block is the tensor's channels: innerBlock).
inline int64_t channelBlock(std::string_view layout) {
  if (layout.empty()) return 0;
  if (layout == "nChw8c") return 8;
  if (layout == "nChw16c") return 16;
  if (layout == kChannelsLast)
    throw Error("the layout nhwc (channels-last, the CUDA backend's) has no fixed channel block; "
                "this kernel reads plain and nChw8c / nChw16c tensors only");
  throw Error("unknown tensor layout '" + std::string(layout) +
              "' (known: plain, nChw8c, nChw16c, nhwc); was the program written by a newer spmd?");
}

// The channels innermost in `layout` for a tensor of C channels: 0 for plain, B for "nChw<B>c",
// C for "nhwc"; throws naming an unknown layout.
inline int64_t innerBlock(std::string_view layout, int64_t C) {
  return layout == kChannelsLast ? C : channelBlock(layout);
}

// What is wrong with giving `layout` to a tensor of `shape` ("" when nothing): a layout other
// than plain needs rank 4, and a channel block whole blocks of channels. Throws naming an unknown
// layout.
inline std::string layoutProblem(std::string_view layout, std::span<const int64_t> shape) {
  if (layout.empty()) return "";
  const int64_t block = layout == kChannelsLast ? 0 : channelBlock(layout);
  if (shape.size() != 4) return "layout " + std::string(layout) + " needs a rank-4 NCHW tensor";
  if (block && shape[1] % block != 0)
    return "layout " + std::string(layout) + " needs channels a multiple of " + std::to_string(block);
  return "";
}

// The element strides of each of `shape`'s dims in `layout`, for a layout that has them: plain
// (row-major) and channels-last ((H*W*C, 1, W*C, C)); throws for a blocked one.
inline std::vector<int64_t> layoutStrides(std::string_view layout, std::span<const int64_t> shape) {
  if (std::string problem = layoutProblem(layout, shape); !problem.empty()) throw Error(problem);
  if (layout == kChannelsLast) {
    const int64_t C = shape[1], H = shape[2], W = shape[3];
    return {H * W * C, 1, W * C, C};
  }
  if (!layout.empty())
    throw Error("the layout " + std::string(layout) + " has no stride per dim (its channels lie in blocks)");
  return rowMajorStrides(shape);
}

// The offset of element (n, c, h, w) of an [N, C, H, W] tensor in the layout with `block`
// channels innermost (innerBlock; 0: plain row-major, C: channels-last).
inline int64_t blockedOffset(int64_t block, int64_t C, int64_t H, int64_t W, int64_t n, int64_t c,
                             int64_t h, int64_t w) {
  if (block == 0) return ((n * C + c) * H + h) * W + w;
  return (((n * (C / block) + c / block) * H + h) * W + w) * block + c % block;
}

class BlockedLayouts {
 public:
  // `layout`: the backend's activation layout, "nChw8c" / "nChw16c" (CPU), "nhwc" (CUDA), or ""
  // for a backend that keeps every tensor plain.
  explicit BlockedLayouts(std::string layout) : layout_(std::move(layout)) {
    if (!layout_.empty() && layout_ != "nChw8c" && layout_ != "nChw16c" && layout_ != kChannelsLast)
      throw Error("activation layouts are nChw8c, nChw16c (the CPU's channel blocks) or nhwc (channels-last), not '" +
                  layout_ + "'");
  }
  const std::string& layout() const { return layout_; }
  bool channelsLast() const { return layout_ == kChannelsLast; }

  // The layout for an activation of `shape`: rank 4 [N, C, H, W] with C a multiple of the
  // block (any C channels-last); "" (plain) for anything else.
  std::string blockedLayout(std::span<const int64_t> shape) const {
    if (layout_.empty() || !layoutProblem(layout_, shape).empty()) return "";
    return layout_;
  }

  // Whether the backend's kernel for `op` (a dialect op name) reads operand `index` in the
  // layout (oneDNN and cuDNN take it as it is instead of reordering); `axes` is the op's axes
  // attribute.
  bool readsBlocked(std::string_view op, int index, std::span<const int64_t> axes) const {
    if (op == "conv2d") return index == 0;
    if (op == "conv2d_backward_data") return index == 0;            // the result's gradient
    if (op == "conv2d_backward_filter") return index == 0 || index == 1;  // input, result's gradient
    if (op == "batch_norm_train" || op == "batch_norm_infer") return index == 0;
    if (op == "batch_norm_train_backward") return index == 0 || index == 1;  // gradient, input
    // A per-channel sum (a convolution's bias gradient) reads the blocks as [N, C/B, H, W, B]
    // on the CPU; the CUDA backend's reductions walk any dims by their strides in either layout.
    if (channelsLast()) return index == 0 && (op == "reduce_sum" || op == "reduce_mean" || op == "reduce_max");
    if (op == "reduce_sum")
      return index == 0 && axes.size() == 3 && axes[0] == 0 && axes[1] == 2 && axes[2] == 3;
    return false;
  }
  // Whether the backend's kernel for `op` can write result `index` in the layout.
  static bool writesBlocked(std::string_view op, int index) {
    if (op == "conv2d" || op == "conv2d_backward_data" || op == "batch_norm_train" ||
        op == "batch_norm_infer" || op == "batch_norm_train_backward")
      return index == 0;
    return false;
  }

 private:
  std::string layout_;
};

}  // namespace spmd::runtime
