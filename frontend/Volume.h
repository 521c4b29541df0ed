// Volumetric ops over [N, C, D, H, W] (torch.nn.functional's conv3d, conv_transpose3d,
// max_pool3d, avg_pool3d), composed of the 2-D ops: each runs conv2d's, conv2d_backward_data's or
// reduce_window's kernels, and its gradient is theirs through the reshapes, slices and pads. Three
// numbers a dimension, in torch's order: depth, height, width. Errors name the caller's line and
// the dimension.
#pragma once

#include <vector>

#include "frontend/Tensor.h"

namespace spmd {

// torch.nn.functional.conv3d: x [N, C, D, H, W], filter [O, C / groups, KD, KH, KW], optional
// bias [O]. x's depth windows (strided and dilated slices of the padded depth) are stacked into
// channels, group by group, as [N * D', KD * C, H, W], and one conv2d runs with the filter's depth
// taps moved beside its input channels ([O, KD * C / groups, KH, KW]).
struct Conv3dOptions {
  std::vector<int64_t> stride = {1, 1, 1};
  std::vector<int64_t> padding = {0, 0, 0};
  std::vector<int64_t> dilation = {1, 1, 1};
  int64_t groups = 1;
};
Tensor conv3d(const Tensor& x, const Tensor& filter, const Tensor& bias = {}, const Conv3dOptions& options = {},
              Loc loc = Loc::current());

// torch.nn.functional.conv_transpose3d: x [N, I, D, H, W], filter [I, O / groups, KD, KH, KW],
// optional bias [O]; the result [N, O, (D - 1) * stride - 2 * padding + dilation * (KD - 1) +
// outputPadding + 1, ...] (each dimension so; outputPadding below the stride): the gradient of
// conv3d with that filter. One convTranspose2d over [N * D, I, H, W] with the filter's depth taps
// among its outputs ([I, KD * O / groups, KH, KW]), then each tap's planes spread `stride` apart,
// shifted by tap * dilation along the depth and added up.
struct ConvTranspose3dOptions {
  std::vector<int64_t> stride = {1, 1, 1};
  std::vector<int64_t> padding = {0, 0, 0};
  std::vector<int64_t> outputPadding = {0, 0, 0};
  std::vector<int64_t> dilation = {1, 1, 1};
  int64_t groups = 1;
};
Tensor convTranspose3d(const Tensor& x, const Tensor& filter, const Tensor& bias = {},
                       const ConvTranspose3dOptions& options = {}, Loc loc = Loc::current());

// 3-D pooling (torch.nn.MaxPool3d / AvgPool3d): the rules of Pool2dOptions (an empty stride is the
// window; padding below the dilated window; every window holds an input element; average pooling
// counts padding unless countIncludePad is false; dilation for either op). A box is a product of
// its three ranges, so the pooling is separable: the (height, width) windows of every depth plane
// (a reduce_window over [N, C * D, H, W]), then the depth windows of those (one over [N, C, D,
// H' * W'] with a [KD, 1] window). Max takes the same element as one pass over the box in
// (depth, height, width) order: the first maximum (or NaN) of the earliest plane that holds one,
// which alone gets the gradient; the average divides by the product of the two passes' divisors,
// which is the box's.
struct Pool3dOptions {
  std::vector<int64_t> window = {2, 2, 2};
  std::vector<int64_t> stride = {};
  std::vector<int64_t> padding = {0, 0, 0};
  std::vector<int64_t> dilation = {1, 1, 1};
  bool countIncludePad = true;
};
Tensor maxPool3d(const Tensor& x, const Pool3dOptions& options = {}, Loc loc = Loc::current());
Tensor avgPool3d(const Tensor& x, const Pool3dOptions& options = {}, Loc loc = Loc::current());

}  // namespace spmd
