// The volumetric ops, composed of the 2-D ones (see Volume.h for each composition).
#include "frontend/Volume.h"

#include <algorithm>
#include <string>

#include "frontend/Ops.h"
#include "frontend/Trace.h"
#include "runtime/base/Error.h"

namespace spmd {

using detail::Trace;
using detail::where;

namespace {

constexpr const char* kDims[] = {"depth", "height", "width"};

// Three numbers (depth, height, width), each at least `least`.
bool triple(const std::vector<int64_t>& v, int64_t least) {
  return v.size() == 3 && std::all_of(v.begin(), v.end(), [least](int64_t n) { return n >= least; });
}

// The pooling options against x, one dimension at a time, with the 2-D op's rules (so that its own
// checks, on the reshaped planes, never fire with their dims).
void checkPool3d(const Tensor& x, const Pool3dOptions& o, const std::vector<int64_t>& stride, const std::string& at) {
  if (x.rank() != 5) throw Error(at + "x must be [N, C, D, H, W], got " + x.typeString());
  if (!triple(o.window, 1) || !triple(stride, 1) || !triple(o.dilation, 1) || !triple(o.padding, 0))
    throw Error(at + "window, stride and dilation must be three positive integers and padding three non-negative ones "
                "(depth, height, width; an empty stride is the window), got window " + shapeString(o.window) +
                ", stride " + shapeString(stride) + ", padding " + shapeString(o.padding) + ", dilation " +
                shapeString(o.dilation));
  for (size_t d = 0; d < 3; ++d) {
    const int64_t size = x.dim(int(d) + 2), k = o.window[d], pad = o.padding[d], step = o.dilation[d];
    const int64_t span = step * (k - 1) + 1;
    const std::string window = "the window's " + std::to_string(k) + " taps along the " + kDims[d] +
                               (step > 1 ? ", dilated by " + std::to_string(step) + "," : std::string()) + " span " +
                               std::to_string(span);
    if (pad >= span)
      throw Error(at + "padding " + std::to_string(pad) + " along the " + kDims[d] +
                  " must be smaller than the window's span there (" + std::to_string(k) + " taps" +
                  (step > 1 ? " dilated by " + std::to_string(step) : std::string()) + ": " + std::to_string(span) +
                  "); PyTorch asks for at most half the window");
    if (size + 2 * pad < span)
      throw Error(at + window + ", more than x's " + kDims[d] + " " + std::to_string(size) + " with padding " +
                  std::to_string(pad) + " on each side (x " + x.typeString() + ")");
    const int64_t outputs = (size + 2 * pad - span) / stride[d] + 1;
    for (int64_t w = 0; w < outputs; ++w) {
      const int64_t first = w * stride[d] - pad;
      bool holds = false;
      for (int64_t t = 0; t < k && !holds; ++t) holds = first + t * step >= 0 && first + t * step < size;
      if (!holds)
        throw Error(at + "window " + std::to_string(w) + " along the " + kDims[d] + " holds only padding (" + window +
                    ", padding " + std::to_string(pad) + ", x " + x.typeString() + "); lower the padding or the dilation");
    }
  }
}

// A 3-D pooling as its two separable passes (Volume.h); a pass whose window is one element that
// steps by one without padding is the identity and is left out.
Tensor pool3d(const Tensor& x, const Pool3dOptions& o, bool max, const char* name, Loc loc) {
  Trace::current(name, loc);
  const std::vector<int64_t>& stride = o.stride.empty() ? o.window : o.stride;
  checkPool3d(x, o, stride, where(loc) + ": spmd::" + name + ": ");
  auto pool = [&](const Tensor& t, const Pool2dOptions& options) {
    return max ? maxPool2d(t, options, loc) : avgPool2d(t, options, loc);
  };
  auto identity = [&](size_t d) { return o.window[d] == 1 && stride[d] == 1 && o.padding[d] == 0; };
  const int64_t n = x.dim(0), channels = x.dim(1), depth = x.dim(2);
  Tensor planes = reshape(x, {n, channels * depth, x.dim(3), x.dim(4)}, loc);
  if (!identity(1) || !identity(2))
    planes = pool(planes, {.window = {o.window[1], o.window[2]},
                           .stride = {stride[1], stride[2]},
                           .padding = {o.padding[1], o.padding[2]},
                           .dilation = {o.dilation[1], o.dilation[2]},
                           .countIncludePad = o.countIncludePad});
  const int64_t height = planes.dim(2), width = planes.dim(3);
  Tensor y = reshape(planes, {n, channels, depth, height * width}, loc);
  if (!identity(0))
    y = pool(y, {.window = {o.window[0], 1},
                 .stride = {stride[0], 1},
                 .padding = {o.padding[0], 0},
                 .dilation = {o.dilation[0], 1},
                 .countIncludePad = o.countIncludePad});
  return reshape(y, {n, channels, y.dim(2), height, width}, loc);
}

}  // namespace

Tensor conv3d(const Tensor& x, const Tensor& filter, const Tensor& bias, const Conv3dOptions& options, Loc loc) {
  Trace::current("conv3d", loc);
  const std::string at = where(loc) + ": spmd::conv3d: ";
  if (x.rank() != 5 || filter.rank() != 5)
    throw Error(at + "x must be [N, C, D, H, W] and filter [O, C / groups, KD, KH, KW], got " + x.typeString() +
                " and " + filter.typeString());
  const Conv3dOptions& o = options;
  if (!triple(o.stride, 1) || !triple(o.dilation, 1) || !triple(o.padding, 0))
    throw Error(at + "stride and dilation must be three positive integers and padding three non-negative ones (depth, "
                "height, width), got stride " + shapeString(o.stride) + ", padding " + shapeString(o.padding) +
                ", dilation " + shapeString(o.dilation));
  const int64_t n = x.dim(0), channels = x.dim(1), depth = x.dim(2), outputs = filter.dim(0), taps = filter.dim(2);
  if (o.groups < 1 || channels % o.groups != 0 || outputs % o.groups != 0)
    throw Error(at + "groups " + std::to_string(o.groups) + " must be positive and divide the input's " +
                std::to_string(channels) + " channels and the filter's " + std::to_string(outputs) + " outputs");
  if (filter.dim(1) * o.groups != channels)
    throw Error(at + "filter " + filter.typeString() + " expects " + std::to_string(filter.dim(1)) +
                " input channels a group, x " + x.typeString() + " has " + std::to_string(channels / o.groups) + " (" +
                std::to_string(o.groups) + " groups)");
  for (int d = 0; d < 3; ++d) {
    const int64_t size = x.dim(d + 2), k = filter.dim(d + 2), spread = o.dilation[size_t(d)] * (k - 1) + 1;
    if (size + 2 * o.padding[size_t(d)] < spread)
      throw Error(at + "the filter's " + std::to_string(k) + " taps along the " + kDims[d] + ", dilated by " +
                  std::to_string(o.dilation[size_t(d)]) + ", span " + std::to_string(spread) + ", more than x's " +
                  kDims[d] + " " + std::to_string(size) + " with padding " + std::to_string(o.padding[size_t(d)]) +
                  " on each side");
  }
  if (bias.defined() && bias.shape() != Shape{outputs})
    throw Error(at + "bias must be [" + std::to_string(outputs) + "] (one per output channel), got " + bias.typeString());
  const int64_t padded = depth + 2 * o.padding[0], reach = o.dilation[0] * (taps - 1) + 1;
  const int64_t out = (padded - reach) / o.stride[0] + 1;
  // [N, D, C, H, W], zeros around the depth (and stride - 1 more after it, so that every tap's
  // window of out * stride planes fits), then each tap's planes d * stride + t * dilation.
  const Shape& s = x.shape();
  const Tensor planes = pad(transpose(x, {0, 2, 1, 3, 4}, loc), {0, o.padding[0], 0, 0, 0},
                            {0, o.padding[0] + o.stride[0] - 1, 0, 0, 0}, loc);
  const int64_t perGroup = channels / o.groups;
  std::vector<Tensor> windows;
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t first = t * o.dilation[0];
    Tensor w = slice(planes, {0, first, 0, 0, 0}, {n, first + out * o.stride[0], channels, s[3], s[4]}, loc);
    if (o.stride[0] > 1)
      w = slice(reshape(w, {n, out, o.stride[0], channels * s[3] * s[4]}, loc), {0, 0, 0, 0},
                {n, out, 1, channels * s[3] * s[4]}, loc);
    windows.push_back(reshape(w, {n, out, o.groups, 1, perGroup, s[3], s[4]}, loc));
  }
  // [N * D', groups, KD, C / groups, H, W]: each group's channels are its taps' channels.
  const Tensor stacked =
      reshape(taps == 1 ? windows[0] : concat(windows, 3, loc), {n * out, taps * channels, s[3], s[4]}, loc);
  const Shape& f = filter.shape();
  const Tensor taps2d = reshape(transpose(filter, {0, 2, 1, 3, 4}, loc), {outputs, taps * f[1], f[3], f[4]}, loc);
  const Tensor y = conv2d(stacked, taps2d, bias,
                          {{o.stride[1], o.stride[2]}, {o.padding[1], o.padding[2]}, {o.dilation[1], o.dilation[2]}, o.groups},
                          loc);
  return transpose(reshape(y, {n, out, outputs, y.dim(2), y.dim(3)}, loc), {0, 2, 1, 3, 4}, loc);
}


Tensor convTranspose3d(const Tensor& x, const Tensor& filter, const Tensor& bias, const ConvTranspose3dOptions& options,
                       Loc loc) {
  Trace::current("convTranspose3d", loc);
  const std::string at = where(loc) + ": spmd::convTranspose3d: ";
  if (x.rank() != 5 || filter.rank() != 5)
    throw Error(at + "x must be [N, I, D, H, W] and filter [I, O / groups, KD, KH, KW], got " + x.typeString() +
                " and " + filter.typeString());
  const ConvTranspose3dOptions& o = options;
  if (!triple(o.stride, 1) || !triple(o.dilation, 1) || !triple(o.padding, 0) || !triple(o.outputPadding, 0))
    throw Error(at + "stride and dilation must be three positive integers, padding and outputPadding three "
                "non-negative ones (depth, height, width), got stride " + shapeString(o.stride) + ", padding " +
                shapeString(o.padding) + ", outputPadding " + shapeString(o.outputPadding) + ", dilation " +
                shapeString(o.dilation));
  if (filter.dim(0) != x.dim(1))
    throw Error(at + "filter " + filter.typeString() + " must have x's " + std::to_string(x.dim(1)) +
                " input channels first ([I, O / groups, KD, KH, KW], torch's layout for a transposed convolution)");
  if (o.groups < 1 || x.dim(1) % o.groups != 0)
    throw Error(at + "groups " + std::to_string(o.groups) + " must be positive and divide x's " +
                std::to_string(x.dim(1)) + " channels");
  Shape result = {x.dim(0), filter.dim(1) * o.groups, 0, 0, 0};
  for (size_t d = 0; d < 3; ++d) {
    if (o.outputPadding[d] >= o.stride[d])
      throw Error(at + "outputPadding " + shapeString(o.outputPadding) + " must be smaller than the stride " +
                  shapeString(o.stride) + " in each dimension (it picks among the sizes a strided convolution maps "
                  "to x's)");
    result[d + 2] = (x.dim(int(d) + 2) - 1) * o.stride[d] - 2 * o.padding[d] +
                    o.dilation[d] * (filter.dim(int(d) + 2) - 1) + o.outputPadding[d] + 1;
    if (result[d + 2] < 1)
      throw Error(at + "the padding " + shapeString(o.padding) + " leaves no output along the " + kDims[d] + " of x " +
                  x.typeString() + " and filter " + filter.typeString());
  }
  const int64_t outputs = result[1];
  if (bias.defined() && bias.shape() != Shape{outputs})
    throw Error(at + "bias must be [" + std::to_string(outputs) + "] (one per output channel), got " + bias.typeString());
  const Shape& s = x.shape();
  const Shape& f = filter.shape();
  const int64_t n = s[0], depth = s[2], taps = f[2], perGroup = f[1];
  // Every input plane through every depth tap at once: [N * D, groups * KD * O / groups, H', W'],
  // each group's outputs its taps' outputs.
  const Tensor planes = reshape(transpose(x, {0, 2, 1, 3, 4}, loc), {n * depth, s[1], s[3], s[4]}, loc);
  const Tensor taps2d = reshape(transpose(filter, {0, 2, 1, 3, 4}, loc), {f[0], taps * perGroup, f[3], f[4]}, loc);
  const Tensor byPlane = convTranspose2d(planes, taps2d, {},
                                         {{o.stride[1], o.stride[2]},
                                          {o.padding[1], o.padding[2]},
                                          {o.outputPadding[1], o.outputPadding[2]},
                                          {o.dilation[1], o.dilation[2]},
                                          o.groups},
                                         loc);
  const int64_t height = byPlane.dim(2), width = byPlane.dim(3), volume = outputs * height * width;
  const Tensor byTap = reshape(byPlane, {n, depth, o.groups, taps, perGroup, height * width}, loc);
  // Input plane i through tap t lands on depth i * stride + t * dilation of the unpadded result:
  // each tap's planes spread `stride` apart (zeros between), shifted by t * dilation, added up;
  // then the padding cut off both ends.
  const int64_t spread = depth * o.stride[0], length = o.dilation[0] * (taps - 1) + spread;
  Tensor total;
  for (int64_t t = 0; t < taps; ++t) {
    Tensor one = reshape(slice(byTap, {0, 0, 0, t, 0, 0}, {n, depth, o.groups, t + 1, perGroup, height * width}, loc),
                         {n, depth, 1, volume}, loc);
    if (o.stride[0] > 1) one = pad(one, {0, 0, 0, 0}, {0, 0, o.stride[0] - 1, 0}, loc);
    const int64_t first = t * o.dilation[0];
    one = pad(reshape(one, {n, spread, volume}, loc), {0, first, 0}, {0, length - first - spread, 0}, loc);
    total = t == 0 ? one : add(total, one, loc);
  }
  const Tensor y = slice(total, {0, o.padding[0], 0}, {n, o.padding[0] + result[2], volume}, loc);
  const Tensor out = transpose(reshape(y, {n, result[2], outputs, height, width}, loc), {0, 2, 1, 3, 4}, loc);
  return bias.defined() ? add(out, reshape(bias, {1, outputs, 1, 1, 1}, loc), loc) : out;
}

Tensor maxPool3d(const Tensor& x, const Pool3dOptions& options, Loc loc) {
  return pool3d(x, options, true, "maxPool3d", loc);
}

Tensor avgPool3d(const Tensor& x, const Pool3dOptions& options, Loc loc) {
  return pool3d(x, options, false, "avgPool3d", loc);
}

}  // namespace spmd
