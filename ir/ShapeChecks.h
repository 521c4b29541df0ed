// Checks shared by the shape rules and verifiers of the `spmd` ops (SpmdShapeRules.cpp,
// SpmdBackwardShapeRules.cpp): each failure names the op, the offending shapes and the fix.
#pragma once

#include <cmath>

#include <optional>
#include <string>

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeRange.h"
#include "mlir/IR/ValueRange.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"
#include "llvm/Support/raw_ostream.h"

namespace spmd::ir::checks {

using namespace mlir;


using OptLoc = std::optional<mlir::Location>;

inline std::string str(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

inline std::string str(ArrayRef<int64_t> values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

inline LogicalResult fail(OptLoc loc, StringRef op, const std::string& message) {
  return emitOptionalError(loc, "spmd.", op, ": ", message);
}

inline RankedTensorType ranked(Value value) {
  return value ? llvm::dyn_cast<RankedTensorType>(value.getType()) : RankedTensorType();
}

// Checks `value` is a ranked tensor of the given rank (any rank if -1) and element type (any if
// null); names the operand in the error.
inline FailureOr<RankedTensorType> expectTensor(OptLoc loc, StringRef op, StringRef what, Value value,
                                         int64_t rank, Type element = {}) {
  RankedTensorType type = ranked(value);
  if (!type) return fail(loc, op, (what + " must be a ranked tensor").str());
  if (rank >= 0 && type.getRank() != rank)
    return fail(loc, op, (what + " must have rank " + Twine(rank) + ", got " + str(type)).str());
  if (element && type.getElementType() != element)
    return fail(loc, op, (what + " has element type " + str(type.getElementType()) +
                          " but must match " + str(element))
                             .str());
  return type;
}

inline LogicalResult expectPerChannel(OptLoc loc, StringRef op, StringRef what, Value value,
                               int64_t channels, Type element) {
  auto type = expectTensor(loc, op, what, value, 1, element);
  if (failed(type)) return failure();
  if (type->getDimSize(0) != channels)
    return fail(loc, op, (what + " " + str(*type) + " must have one entry per channel (" +
                          Twine(channels) + ")")
                             .str());
  return success();
}

// Axes must be unique, sorted and inside [0, rank).
inline LogicalResult checkAxes(OptLoc loc, StringRef op, ArrayRef<int64_t> axes, int64_t rank) {
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return fail(loc, op, "axis " + std::to_string(axes[i]) + " is out of range for rank " +
                               std::to_string(rank));
    if (i && axes[i] <= axes[i - 1])
      return fail(loc, op, "axes " + str(axes) + " must be sorted and unique");
  }
  return success();
}

inline SmallVector<int64_t> dropAxes(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (!llvm::is_contained(axes, i)) kept.push_back(shape[i]);
  return kept;
}

inline LogicalResult inferBatchNorm(OptLoc loc, StringRef op, Value input, ValueRange perChannel,
                             ArrayRef<StringRef> names, FloatAttr epsilon) {
  auto in = expectTensor(loc, op, "input", input, -1);
  if (failed(in)) return failure();
  if (in->getRank() != 2 && in->getRank() != 4)
    return fail(loc, op, "input must be [N, C] or [N, C, H, W], got " + str(*in));
  for (auto [value, name] : llvm::zip(perChannel, names))
    if (failed(expectPerChannel(loc, op, name, value, in->getDimSize(1), in->getElementType())))
      return failure();
  if (!epsilon || !(epsilon.getValueAsDouble() > 0) || !std::isfinite(epsilon.getValueAsDouble()))
    return fail(loc, op, "epsilon must be a positive finite float, got " +
                             (epsilon ? std::to_string(epsilon.getValueAsDouble()) : std::string("none")));
  return success();
}

// batch_norm_train's optional mask: one weight per example ([N]) in the input's element type.
inline LogicalResult expectRowMask(OptLoc loc, StringRef op, Value mask, RankedTensorType in) {
  if (!mask) return success();
  auto type = expectTensor(loc, op, "mask", mask, 1, in.getElementType());
  if (failed(type)) return failure();
  if (type->getDimSize(0) != in.getDimSize(0))
    return fail(loc, op, ("mask " + str(*type) + " must have one entry per example (" + Twine(in.getDimSize(0)) +
                          ") of input " + str(in))
                             .str());
  return success();
}

// The forward conv2d's output shape for input, filter, stride, padding, dilation (empty: 1, 1)
// and groups (an absent attribute: 1; an explicit 0 is refused, as torch refuses it).
inline FailureOr<SmallVector<int64_t>> convOutputShape(OptLoc loc, StringRef op,
                                                       RankedTensorType in,
                                                       RankedTensorType filter,
                                                       ArrayRef<int64_t> stride,
                                                       ArrayRef<int64_t> padding,
                                                       ArrayRef<int64_t> dilation = {},
                                                       int64_t groups = 1) {
  const int64_t channels = in.getDimSize(1), outputs = filter.getDimSize(0);
  if (groups < 1 || channels % groups != 0 || outputs % groups != 0)
    return fail(loc, op, "groups " + std::to_string(groups) + " must be positive and divide the input's " +
                             std::to_string(channels) + " channels and the filter's " + std::to_string(outputs) +
                             " outputs (filter " + str(filter) + ")");
  if (channels / groups != filter.getDimSize(1))
    return fail(loc, op, "input " + str(in) + " has " + std::to_string(channels) + " channels but filter " +
                             str(filter) + " expects " + std::to_string(filter.getDimSize(1)) +
                             (groups > 1 ? " a group (" + std::to_string(groups) + " groups: " +
                                               std::to_string(channels / groups) + " a group)"
                                         : std::string()));
  if (stride.size() != 2 || stride[0] < 1 || stride[1] < 1)
    return fail(loc, op, "stride must be two positive integers, got " + str(stride));
  if (padding.size() != 2 || padding[0] < 0 || padding[1] < 0)
    return fail(loc, op, "padding must be two non-negative integers, got " + str(padding));
  const SmallVector<int64_t> dil = dilation.empty() ? SmallVector<int64_t>{1, 1} : SmallVector<int64_t>(dilation);
  if (dil.size() != 2 || dil[0] < 1 || dil[1] < 1)
    return fail(loc, op, "dilation must be two positive integers, got " + str(dilation));
  SmallVector<int64_t> out{in.getDimSize(0), outputs, 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t padded = in.getDimSize(2 + i) + 2 * padding[i];
    const int64_t reach = dil[i] * (filter.getDimSize(2 + i) - 1) + 1;  // the dilated filter's extent
    if (padded < reach)
      return fail(loc, op, "filter " + str(filter) + (dil[i] > 1 ? " dilated by " + str(dil) : std::string()) +
                               " is larger than the padded input " + str(in) + " (padding " + str(padding) + ")");
    out[2 + i] = (padded - reach) / stride[i] + 1;
  }
  return out;
}

// The output shape of a 2-D pooling window over an NCHW input; padding must stay below the
// window so that no window lies wholly in the padding.
// The output shape of reduce_window over the last two dims of [N, C, H, W] (see SpmdOps.td).
inline FailureOr<SmallVector<int64_t>> windowOutputShape(OptLoc loc, StringRef op,
                                                         RankedTensorType in,
                                                         ArrayRef<int64_t> window,
                                                         ArrayRef<int64_t> stride,
                                                         ArrayRef<int64_t> padding,
                                                         ArrayRef<int64_t> dilation) {
  if (in.getRank() != 4) return fail(loc, op, "input must be [N, C, H, W], got " + str(in));
  if (window.size() != 2 || window[0] < 1 || window[1] < 1)
    return fail(loc, op, "window must be two positive integers, got " + str(window));
  if (stride.size() != 2 || stride[0] < 1 || stride[1] < 1)
    return fail(loc, op, "stride must be two positive integers, got " + str(stride));
  if (dilation.size() != 2 || dilation[0] < 1 || dilation[1] < 1)
    return fail(loc, op, "dilation must be two positive integers, got " + str(dilation));
  SmallVector<int64_t> span{dilation[0] * (window[0] - 1) + 1, dilation[1] * (window[1] - 1) + 1};
  if (padding.size() != 2 || padding[0] < 0 || padding[1] < 0 || padding[0] >= span[0] ||
      padding[1] >= span[1])
    return fail(loc, op, "padding must be two integers in [0, window), got " + str(padding) +
                             " for window " + str(window) +
                             (span[0] != window[0] || span[1] != window[1]
                                  ? " (dilated to " + str(ArrayRef<int64_t>(span)) + ")"
                                  : std::string()));
  SmallVector<int64_t> out{in.getDimSize(0), in.getDimSize(1), 0, 0};
  for (int i = 0; i < 2; ++i) {
    int64_t size = in.getDimSize(2 + i), padded = size + 2 * padding[i];
    if (padded < span[i])
      return fail(loc, op, "window " + str(window) + " is larger than the padded input " +
                               str(in) + " (padding " + str(padding) + ")");
    out[2 + i] = (padded - span[i]) / stride[i] + 1;
    // Dilated taps can step over a small input: every window must hold an input element.
    for (int64_t o = 0; o < out[2 + i]; ++o) {
      int64_t first = o * stride[i] - padding[i];
      bool holds = false;
      for (int64_t k = 0; k < window[i] && !holds; ++k)
        holds = first + k * dilation[i] >= 0 && first + k * dilation[i] < size;
      if (!holds)
        return fail(loc, op, "window " + std::to_string(o) + " along dim " + std::to_string(2 + i) +
                                 " of " + str(in) + " holds only padding (window " + str(window) +
                                 ", dilation " + str(dilation) + ", padding " + str(padding) +
                                 "); lower the padding or the dilation");
    }
  }
  return out;
}

}  // namespace spmd::ir::checks
