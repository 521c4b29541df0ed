// The kernel cases' definitions (KernelCases.h says what each is for).
#include "KernelCases.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/device/CustomKernels.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime {

Array relaid(const Array& a, const std::string& from, const std::string& to) {
  if (from == to) return a;
  Array out = Array::zeros(a.dtype, a.shape);
  Step step{"relayout", {}, {}, {}, "KernelCases"};
  TensorView in[] = {{const_cast<Array&>(a).data(), a.dtype, a.shape, from}};
  TensorView res[] = {{out.data(), out.dtype, out.shape, to}};
  std::shared_ptr<void> cache;
  KernelCall call{step, in, res, cache};
  referenceKernels().at("relayout")(call);
  return out;
}

std::vector<Array> inputsInLayout(const KernelCase& c) {
  std::vector<Array> out;
  for (size_t i = 0; i < c.inputs.size(); ++i) out.push_back(relaid(c.inputs[i], "", c.layout(i)));
  return out;
}
void outputsToPlain(const KernelCase& c, std::vector<Array>& outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    outputs[i] = relaid(outputs[i], c.layout(c.inputs.size() + i), "");
}
KernelCase plainCase(KernelCase c) {
  c.layouts.clear();
  return c;
}

Program oneStepProgram(const KernelCase& c, const std::string& location) {
  Program p;
  p.name = c.name;
  Step step{c.op, {}, {}, c.attrs, location};
  for (const Array& a : c.inputs) {
    step.inputs.push_back(static_cast<int>(p.buffers.size()));
    p.inputs.push_back(static_cast<int>(p.buffers.size()));
    p.buffers.push_back({a.dtype, a.shape, {}});
    p.buffers.back().layout = c.layout(p.buffers.size() - 1);
  }
  for (auto& [dtype, shape] : c.outputs) {
    step.outputs.push_back(static_cast<int>(p.buffers.size()));
    p.outputs.push_back(static_cast<int>(p.buffers.size()));
    p.buffers.push_back({dtype, shape, {}});
    p.buffers.back().layout = c.layout(p.buffers.size() - 1);
  }
  p.steps.push_back(step);
  return p;
}

Array poisoned(DType dtype, const Shape& shape) {
  Array a = Array::zeros(dtype, shape);
  if (dtype == DType::f32) std::fill_n(a.values<float>().data(), a.numel(), std::numeric_limits<float>::quiet_NaN());
  if (dtype == DType::f64) std::fill_n(a.values<double>().data(), a.numel(), std::numeric_limits<double>::quiet_NaN());
  if (dtype == DType::i32) std::fill_n(a.values<int32_t>().data(), a.numel(), -12345);
  return a;
}

std::vector<Array> runKernel(const KernelTable& table, const KernelCase& c, std::string* variant) {
  Step step{c.op, {}, {}, c.attrs, "KernelTest"};
  decodeAttributes(step);
  std::vector<TensorView> in, out;
  std::vector<Array> results;
  std::vector<Array> inputs = inputsInLayout(c);
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({inputs[i].data(), inputs[i].dtype, inputs[i].shape, c.layout(i)});
  for (auto& [dtype, shape] : c.outputs) results.push_back(poisoned(dtype, shape));
  for (size_t i = 0; i < results.size(); ++i)
    out.push_back({results[i].data(), results[i].dtype, results[i].shape, c.layout(inputs.size() + i)});
  std::shared_ptr<void> cache;
  KernelCall call{step, in, out, cache, nullptr, nullptr, nullptr, nullptr, variant};
  table.at(c.op)(call);
  table.at(c.op)(call);  // second call reuses the cached primitive
  outputsToPlain(c, results);
  return results;
}

namespace {

// A fused body over [N, C, H, W] broadcasting plain inputs: a per-channel vector, a [1, C, 1, 1]
// and a pooled [N, C] (the pooling gradient); the blocked and channels-last cases walk them in
// their layout's order.
constexpr const char* kBroadcastBody =
    "%0 = load 0; %1 = load 1 dims [1]; %2 = mul %0 %1; %3 = load 2 dims [0, 1, 2, 3]; %4 = add %2 %3; "
    "%5 = load 3 dims [0, 1]; %6 = relu_backward %5 %4; %7 = sub %4 %5; yield %6 %7";

// batch_norm_train's mask of n rows: 1 for an example, 0 for a padding row (rows 1 and n - 1).
Array paddingMask(DType t, int64_t n) {
  std::vector<double> m(size_t(n), 1.0);
  m[1] = m[size_t(n) - 1] = 0.0;
  return t == DType::f32 ? Array::of<float>({n}, std::vector<float>(m.begin(), m.end())) : Array::of<double>({n}, m);
}

}  // namespace

std::vector<KernelCase> kernelCases(DType t) {
  std::string suffix = t == DType::f32 ? "/f32" : "/f64";
  uint64_t seed = t == DType::f32 ? 1 : 1001;
  auto rnd = [&](Shape s, double lo = -1, double hi = 1) { return spmd::testing::randomArray(t, s, seed++, lo, hi); };
  auto labels = [&](int64_t n, int64_t classes) {
    return spmd::testing::randomArray(DType::i32, {n}, seed++, 0, double(classes) - 1e-9);
  };
  auto mask = [&](int64_t n) { return paddingMask(t, n); };
  using V = std::vector<int64_t>;
  std::vector<KernelCase> list = {
      {"conv 3x3 pad1 bias", "conv2d", {rnd({2, 3, 9, 7}), rnd({5, 3, 3, 3}), rnd({5})},
       {{t, {2, 5, 9, 7}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}},
      {"conv 3x3 stride2 nobias", "conv2d", {rnd({3, 4, 11, 10}), rnd({6, 4, 3, 3})},
       {{t, {3, 6, 6, 5}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}},
      {"conv 1x1 stride2", "conv2d", {rnd({2, 8, 7, 7}), rnd({16, 8, 1, 1}), rnd({16})},
       {{t, {2, 16, 4, 4}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}},
      {"conv stem 28x28", "conv2d", {rnd({2, 1, 28, 28}), rnd({8, 1, 3, 3}), rnd({8})},
       {{t, {2, 8, 28, 28}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}},
      // conv2d's relu (spmd-fuse-relu): after the bias, and without one.
      {"conv 3x3 pad1 bias relu", "conv2d", {rnd({2, 3, 9, 7}), rnd({5, 3, 3, 3}), rnd({5})},
       {{t, {2, 5, 9, 7}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}, {"relu", true}}},
      {"conv 3x3 stride2 relu, no bias", "conv2d", {rnd({3, 4, 11, 10}), rnd({6, 4, 3, 3})},
       {{t, {3, 6, 6, 5}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}, {"relu", true}}},
      {"bn train 4d", "batch_norm_train", {rnd({3, 5, 7, 6}), rnd({5}), rnd({5})},
       {{t, {3, 5, 7, 6}}, {t, {5}}, {t, {5}}}, {{"epsilon", 1e-5}}},
      {"bn train 2d", "batch_norm_train", {rnd({9, 7}, -3, 5), rnd({7}), rnd({7})},
       {{t, {9, 7}}, {t, {7}}, {t, {7}}}, {{"epsilon", 1e-3}}},
      {"bn train relu 4d", "batch_norm_train", {rnd({3, 5, 7, 6}), rnd({5}), rnd({5})},
       {{t, {3, 5, 7, 6}}, {t, {5}}, {t, {5}}}, {{"epsilon", 1e-5}, {"relu", true}}},
      {"bn train masked 4d", "batch_norm_train", {rnd({4, 5, 7, 6}), rnd({5}), rnd({5}), mask(4)},
       {{t, {4, 5, 7, 6}}, {t, {5}}, {t, {5}}}, {{"epsilon", 1e-5}}},
      {"bn train masked 2d", "batch_norm_train", {rnd({9, 7}, -3, 5), rnd({7}), rnd({7}), mask(9)},
       {{t, {9, 7}}, {t, {7}}, {t, {7}}}, {{"epsilon", 1e-3}}},
      {"bn train all padding 4d", "batch_norm_train", {rnd({4, 5, 7, 6}), rnd({5}), rnd({5}), Array::zeros(t, {4})},
       {{t, {4, 5, 7, 6}}, {t, {5}}, {t, {5}}}, {{"epsilon", 1e-5}}},
      {"bn train bwd all padding", "batch_norm_train_backward",
       {rnd({4, 5, 7, 6}), rnd({4, 5, 7, 6}), rnd({5}), rnd({5}), rnd({5}, 0.5, 2), Array::zeros(t, {4})},
       {{t, {4, 5, 7, 6}}, {t, {5}}, {t, {5}}}, {{"epsilon", 1e-5}}},
      {"bn train masked relu 4d", "batch_norm_train", {rnd({4, 5, 7, 6}), rnd({5}), rnd({5}), mask(4)},
       {{t, {4, 5, 7, 6}}, {t, {5}}, {t, {5}}}, {{"epsilon", 1e-5}, {"relu", true}}},
      {"bn infer", "batch_norm_infer",
       {rnd({3, 5, 7, 6}), rnd({5}), rnd({5}), rnd({5}), rnd({5}, 0.5, 2)},
       {{t, {3, 5, 7, 6}}}, {{"epsilon", 1e-5}}},
      {"broadcast vector", "broadcast_in_dim", {rnd({3})}, {{t, {2, 3, 4}}}, {{"dims", V{1}}}},
      {"broadcast ones", "broadcast_in_dim", {rnd({2, 1, 4})}, {{t, {2, 5, 4}}},
       {{"dims", V{0, 1, 2}}}},
      {"broadcast i32", "broadcast_in_dim", {labels(3, 10)}, {{DType::i32, {3, 5}}},
       {{"dims", V{0}}}},
      {"reshape", "reshape", {rnd({2, 3, 5})}, {{t, {6, 5}}}, {}},
      {"transpose nchw->nhwc", "transpose", {rnd({2, 3, 5, 7})}, {{t, {2, 5, 7, 3}}},
       {{"perm", V{0, 2, 3, 1}}}},
      {"transpose 2d", "transpose", {rnd({13, 7})}, {{t, {7, 13}}}, {{"perm", V{1, 0}}}},
      {"reduce_sum hw", "reduce_sum", {rnd({3, 5, 7, 6})}, {{t, {3, 5}}}, {{"axes", V{2, 3}}}},
      {"reduce_sum n,h", "reduce_sum", {rnd({3, 5, 7, 6})}, {{t, {5, 6}}}, {{"axes", V{0, 2}}}},
      {"reduce_sum all", "reduce_sum", {rnd({3, 5, 7})}, {{t, {}}}, {{"axes", V{0, 1, 2}}}},
      {"reduce_mean hw", "reduce_mean", {rnd({3, 5, 7, 6})}, {{t, {3, 5}}}, {{"axes", V{2, 3}}}},
      {"reduce_mean c", "reduce_mean", {rnd({3, 5, 7})}, {{t, {3, 7}}}, {{"axes", V{1}}}},
      {"reduce_max last", "reduce_max", {rnd({4, 9})}, {{t, {4}}}, {{"axes", V{1}}}},
      {"reduce_max first", "reduce_max", {rnd({4, 9, 3})}, {{t, {9, 3}}}, {{"axes", V{0}}}},
      // Large enough that the CPU kernel cuts the rows into several chunks (runtime/cpu/Reduce.cpp).
      {"reduce_sum per channel chunked", "reduce_sum", {rnd({8, 24, 23, 25})}, {{t, {24}}}, {{"axes", V{0, 2, 3}}}},
      {"reduce_mean first chunked", "reduce_mean", {rnd({301, 500})}, {{t, {500}}}, {{"axes", V{0}}}},
      {"reduce_max rows chunked", "reduce_max", {rnd({203, 700})}, {{t, {203}}}, {{"axes", V{1}}}},
      {"reduce_sum all chunked", "reduce_sum", {rnd({7, 101, 99})}, {{t, {}}}, {{"axes", V{0, 1, 2}}}},
      {"reduce_sum no axes", "reduce_sum", {rnd({3, 4})}, {{t, {3, 4}}}, {{"axes", V{}}}},
      {"reduce_max no axes", "reduce_max", {rnd({7})}, {{t, {7}}}, {{"axes", V{}}}},
      {"reduce_mean hw chunked", "reduce_mean", {rnd({33, 130, 4, 4})}, {{t, {33, 130}}}, {{"axes", V{2, 3}}}},
      {"argmax rows", "argmax", {rnd({7, 10})}, {{DType::i32, {7}}}, {{"axis", int64_t{1}}}},
      {"argmax middle", "argmax", {rnd({3, 5, 4})}, {{DType::i32, {3, 4}}}, {{"axis", int64_t{1}}}},
      {"matmul bias", "matmul", {rnd({5, 7}), rnd({7, 9}), rnd({9})}, {{t, {5, 9}}}, {}},
      {"matmul A^T", "matmul", {rnd({7, 5}), rnd({7, 9})}, {{t, {5, 9}}},
       {{"transpose_lhs", true}}},
      {"matmul B^T bias", "matmul", {rnd({6, 11}), rnd({3, 11}), rnd({3})}, {{t, {6, 3}}},
       {{"transpose_rhs", true}}},
      {"matmul A^T B^T", "matmul", {rnd({4, 6}), rnd({5, 4})}, {{t, {6, 5}}},
       {{"transpose_lhs", true}, {"transpose_rhs", true}}},
      {"batched matmul bias", "matmul", {rnd({3, 5, 7}), rnd({3, 7, 4}), rnd({4})}, {{t, {3, 5, 4}}}, {}},
      {"batched matmul A^T B^T", "matmul", {rnd({2, 6, 5}), rnd({2, 3, 6})}, {{t, {2, 5, 3}}},
       {{"transpose_lhs", true}, {"transpose_rhs", true}}},
      // Cut by the sliced matmul (runtime/cpu/SlicedOnednn.cpp) when ConvVariantTest gives a
      // slice the least work: 16 slices of rows; 6 of the batch.
      {"matmul sliced A^T bias", "matmul", {rnd({128, 64}), rnd({128, 40}), rnd({40})}, {{t, {64, 40}}},
       {{"transpose_lhs", true}}},
      {"batched matmul sliced B^T", "matmul", {rnd({6, 32, 64}), rnd({6, 48, 64})}, {{t, {6, 32, 48}}},
       {{"transpose_rhs", true}}},
      // 17 images: the sliced convolutions' last slice (as ConvVariantTest cuts them) is shorter.
      {"conv 17 images", "conv2d", {rnd({17, 4, 5, 5}), rnd({6, 4, 3, 3}), rnd({6})}, {{t, {17, 6, 5, 5}}},
       {{"stride", V{1, 1}}, {"padding", V{1, 1}}}},
      {"softmax xent", "softmax_cross_entropy", {rnd({9, 10}, -4, 4), labels(9, 10)},
       {{t, {9}}}, {}},
      // Dilated and grouped convolutions (torch.nn.Conv2d's dilation and groups): oneDNN's kernels
      // and the reference loops run them, our own variants do not.
      {"conv dilated 2x2", "conv2d", {rnd({2, 3, 11, 9}), rnd({4, 3, 3, 3}), rnd({4})}, {{t, {2, 4, 11, 9}}},
       {{"stride", V{1, 1}}, {"padding", V{2, 2}}, {"dilation", V{2, 2}}}},
      {"conv 3 groups stride2", "conv2d", {rnd({2, 6, 7, 7}), rnd({9, 2, 3, 3}), rnd({9})}, {{t, {2, 9, 4, 4}}},
       {{"stride", V{2, 2}}, {"padding", V{1, 1}}, {"groups", int64_t{3}}}},
      {"conv depthwise x2 dilated 2x1 relu", "conv2d", {rnd({2, 4, 8, 8}), rnd({8, 1, 3, 3}), rnd({8})},
       {{t, {2, 8, 8, 8}}},
       {{"stride", V{1, 1}}, {"padding", V{2, 1}}, {"dilation", V{2, 1}}, {"groups", int64_t{4}}, {"relu", true}}},
  };
  // Their gradients, as the VJP rules emit them.
  struct OtherConv { Shape x, w, y; V stride, padding, dilation; int64_t groups; };
  for (const OtherConv& g : {OtherConv{{2, 3, 11, 9}, {4, 3, 3, 3}, {2, 4, 11, 9}, {1, 1}, {2, 2}, {2, 2}, 1},
                             OtherConv{{2, 6, 7, 7}, {9, 2, 3, 3}, {2, 9, 4, 4}, {2, 2}, {1, 1}, {1, 1}, 3},
                             OtherConv{{2, 4, 8, 8}, {8, 1, 3, 3}, {2, 8, 8, 8}, {1, 1}, {2, 1}, {2, 1}, 4}}) {
    const std::string geometry = " " + shapeString(g.w) + " dilation" + std::to_string(g.dilation[0]) + " groups" +
                                 std::to_string(g.groups);
    const std::map<std::string, Attr> attrs = {
        {"stride", g.stride}, {"padding", g.padding}, {"dilation", g.dilation}, {"groups", g.groups}};
    list.push_back({"conv bwd data" + geometry, "conv2d_backward_data", {rnd(g.y), rnd(g.w)}, {{t, g.x}}, attrs});
    list.push_back({"conv bwd filter" + geometry, "conv2d_backward_filter", {rnd(g.x), rnd(g.y)}, {{t, g.w}}, attrs});
  }
  // Backward ops: shapes as the VJP rules emit them for the forward cases above.
  struct ConvShape { Shape x, w, y; V stride, padding; };
  for (const ConvShape& g : {ConvShape{{2, 3, 9, 7}, {5, 3, 3, 3}, {2, 5, 9, 7}, {1, 1}, {1, 1}},
                             ConvShape{{3, 4, 11, 10}, {6, 4, 3, 3}, {3, 6, 6, 5}, {2, 2}, {1, 1}},
                             ConvShape{{2, 8, 7, 7}, {16, 8, 1, 1}, {2, 16, 4, 4}, {2, 2}, {0, 0}},
                             ConvShape{{2, 1, 28, 28}, {8, 1, 3, 3}, {2, 8, 28, 28}, {1, 1}, {1, 1}},
                             // The width-2 ResNet-18 of the SPMD equivalence test at local batch 3:
                             // 2 channels run in oneDNN's padded blocked layout (aBcd8b).
                             ConvShape{{3, 1, 16, 16}, {2, 1, 3, 3}, {3, 2, 16, 16}, {1, 1}, {1, 1}},
                             ConvShape{{3, 2, 16, 16}, {2, 2, 3, 3}, {3, 2, 16, 16}, {1, 1}, {1, 1}},
                             ConvShape{{17, 4, 5, 5}, {6, 4, 3, 3}, {17, 6, 5, 5}, {1, 1}, {1, 1}}}) {
    std::string geometry = " " + shapeString(g.w) + " stride" + std::to_string(g.stride[0]);
    list.push_back({"conv bwd data" + geometry, "conv2d_backward_data", {rnd(g.y), rnd(g.w)},
                    {{t, g.x}}, {{"stride", g.stride}, {"padding", g.padding}}});
    list.push_back({"conv bwd filter" + geometry, "conv2d_backward_filter", {rnd(g.x), rnd(g.y)},
                    {{t, g.w}}, {{"stride", g.stride}, {"padding", g.padding}}});
  }
  // Two-stage reductions (runtime/kernels/Slices.h): channels of more than 8192 elements take
  // several slices: rows longer and shorter than a block, masked or not.
  for (Shape x : {Shape{5, 3, 45, 41}, Shape{300, 2, 5, 6}}) {
    const int64_t c = x[1];
    list.push_back({"bn train sliced " + shapeString(x), "batch_norm_train", {rnd(x, -2, 3), rnd({c}), rnd({c})},
                    {{t, x}, {t, {c}}, {t, {c}}}, {{"epsilon", 1e-5}}});
    list.push_back({"bn train sliced masked " + shapeString(x), "batch_norm_train",
                    {rnd(x, -2, 3), rnd({c}), rnd({c}), mask(x[0])}, {{t, x}, {t, {c}}, {t, {c}}}, {{"epsilon", 1e-5}}});
    list.push_back({"reduce_sum per channel sliced " + shapeString(x), "reduce_sum", {rnd(x)}, {{t, {c}}},
                    {{"axes", V{0, 2, 3}}}});
  }
  list.push_back({"reduce_max rows sliced", "reduce_max", {rnd({3, 20000})}, {{t, {3}}}, {{"axes", V{1}}}});
  list.push_back({"reduce_mean first sliced", "reduce_mean", {rnd({17000, 2})}, {{t, {2}}}, {{"axes", V{0}}}});
  for (Shape x : {Shape{3, 5, 7, 6}, Shape{9, 7}, Shape{3, 2, 16, 16}, Shape{5, 3, 45, 41}, Shape{300, 2, 5, 6}}) {
    int64_t c = x[1];
    list.push_back({"bn train bwd " + shapeString(x), "batch_norm_train_backward",
                    {rnd(x), rnd(x, -2, 3), rnd({c}), rnd({c}), rnd({c}, 0.5, 2)},
                    {{t, x}, {t, {c}}, {t, {c}}}, {{"epsilon", 1e-5}}});
    list.push_back({"bn train bwd masked " + shapeString(x), "batch_norm_train_backward",
                    {rnd(x), rnd(x, -2, 3), rnd({c}), rnd({c}), rnd({c}, 0.5, 2), mask(x[0])},
                    {{t, x}, {t, {c}}, {t, {c}}}, {{"epsilon", 1e-5}}});
  }
  list.push_back({"relu bwd", "relu_backward", {rnd({3, 17, 5}), rnd({3, 17, 5})},
                  {{t, {3, 17, 5}}}, {}});
  // Comparisons on coarse values, so that equal elements occur.
  for (std::string op : {"greater_equal", "greater", "less_equal", "less", "equal", "not_equal"}) {
    Array a = rnd({3, 17, 5}, -2, 2), b = rnd({3, 17, 5}, -2, 2);
    for (Array* x : {&a, &b})
      for (int64_t i = 0; i < x->numel(); ++i) {
        if (t == DType::f32) x->values<float>()[i] = std::round(x->values<float>()[i]);
        else x->values<double>()[i] = std::round(x->values<double>()[i]);
      }
    list.push_back({op, op, {a, b}, {{t, {3, 17, 5}}}, {}});
  }
  list.push_back({"softmax xent bwd", "softmax_cross_entropy_backward",
                  {rnd({9, 10}, -4, 4), labels(9, 10), rnd({9})}, {{t, {9, 10}}}, {}});
  // 70 classes: the CPU's f32 rows take four whole 16-lane blocks and a tail.
  list.push_back({"softmax xent 70 classes", "softmax_cross_entropy", {rnd({5, 70}, -30, 30), labels(5, 70)},
                  {{t, {5}}}, {}});
  list.push_back({"softmax xent bwd 70 classes", "softmax_cross_entropy_backward",
                  {rnd({5, 70}, -30, 30), labels(5, 70), rnd({5})}, {{t, {5, 70}}}, {}});
  for (std::string op : {"add", "sub", "mul", "div", "max", "min"})
    list.push_back({op, op, {rnd({3, 17, 5}), rnd({3, 17, 5}, 0.5, 2)}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"gelu bwd", "gelu_backward", {rnd({3, 17, 5}), rnd({3, 17, 5}, -4, 4)},
                  {{t, {3, 17, 5}}}, {}});
  for (std::string op : {"neg", "abs", "exp", "relu", "tanh", "sigmoid", "gelu", "sin", "cos"})
    list.push_back({op, op, {rnd({3, 17, 5}, -3, 3)}, {{t, {3, 17, 5}}}, {}});
  for (std::string op : {"log", "sqrt"})
    list.push_back({op, op, {rnd({3, 17, 5}, 0.1, 4)}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"log1p", "log1p", {rnd({3, 17, 5}, -0.9, 4)}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"expm1", "expm1", {rnd({3, 17, 5}, -3, 3)}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"erf", "erf", {rnd({3, 17, 5}, -4, 4)}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"erfinv", "erfinv", {rnd({3, 17, 5}, -0.999, 0.999)}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"pow", "pow", {rnd({3, 17, 5}, 0.1, 4), rnd({3, 17, 5}, -3, 3)}, {{t, {3, 17, 5}}}, {}});
  for (std::string op : {"floor", "ceil", "round", "sign"})
    list.push_back({op, op, {rnd({3, 17, 5}, -3, 3)}, {{t, {3, 17, 5}}}, {}});
  // reduce_window (every pooling op) forward and backward for each reduction on the same
  // geometries; "ties" rounds inputs to steps of 0.5 so windows hold equal maxima (the first one
  // wins, as in PyTorch); the dilated ones have windows that step over rows and columns.
  auto coarse = [&](Shape s) {
    Array a = rnd(s, -2, 2);
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (t == DType::f32) a.values<float>()[i] = std::round(a.values<float>()[i] * 2) / 2;
      else a.values<double>()[i] = std::round(a.values<double>()[i] * 2) / 2;
    }
    return a;
  };
  // argsort: ties (steps of 0.5), NaNs and both zeros, so that the order of equal elements and
  // NaN's place are checked; rows along the last, the first and a middle axis.
  {
    Array x = coarse({3, 9, 4});
    auto put = [&](int64_t i, double v) {
      if (t == DType::f32) x.values<float>()[i] = float(v);
      else x.values<double>()[i] = v;
    };
    for (int64_t i : {1, 7, 30, 31, 50}) put(i, NAN);
    for (int64_t i : {2, 5, 40}) put(i, -0.0);
    for (int64_t i : {9, 41}) put(i, 0.0);
    list.push_back({"argsort last ties nan", "argsort", {x}, {{DType::i32, {3, 9, 4}}}, {{"axis", int64_t{2}}}});
    list.push_back({"argsort middle descending", "argsort", {x}, {{DType::i32, {3, 9, 4}}},
                    {{"axis", int64_t{1}}, {"descending", true}}});
    list.push_back({"argsort first", "argsort", {x}, {{DType::i32, {3, 9, 4}}}, {{"axis", int64_t{0}}}});
    // Rows longer than the library's counting kernel takes (runtime/kernels/Reduce.h): its merge
    // sort, a last run without a partner in some passes (300 and 261 are not powers of two).
    list.push_back({"argsort long rows ties", "argsort", {coarse({2, 300})}, {{DType::i32, {2, 300}}}, {{"axis", int64_t{1}}}});
    Array y = coarse({2, 261, 3});
    for (int64_t i = 0; i < y.numel(); i += 7) {
      const double v = i % 3 == 0 ? NAN : i % 3 == 1 ? -0.0 : 0.0;
      if (t == DType::f32) y.values<float>()[i] = float(v);
      else y.values<double>()[i] = v;
    }
    list.push_back({"argsort long middle descending nan", "argsort", {y}, {{DType::i32, {2, 261, 3}}},
                    {{"axis", int64_t{1}}, {"descending", true}}});
  }
  struct WindowGeometry { std::string name; Shape x, y; V window, stride, padding, dilation; bool ties; };
  for (const WindowGeometry& g :
       {WindowGeometry{"2x2", {2, 3, 8, 7}, {2, 3, 4, 3}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
        WindowGeometry{"3x3 stride2 pad1", {2, 3, 9, 8}, {2, 3, 5, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
        WindowGeometry{"3x2 stride(1,2) pad(1,0)", {1, 2, 6, 7}, {1, 2, 6, 3}, {3, 2}, {1, 2}, {1, 0}, {1, 1}, false},
        WindowGeometry{"3x3 stride1 pad1 ties", {1, 2, 6, 5}, {1, 2, 6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true},
        WindowGeometry{"3x3 dilation2 pad2", {1, 2, 9, 8}, {1, 2, 9, 8}, {3, 3}, {1, 1}, {2, 2}, {2, 2}, false},
        WindowGeometry{"2x3 stride2 dilation(2,1) pad1 ties", {2, 2, 7, 9}, {2, 2, 4, 5}, {2, 3}, {2, 2}, {1, 1},
                       {2, 1}, true}}) {
    Array x = g.ties ? coarse(g.x) : rnd(g.x);
    for (auto [kind, countPad] : {std::pair<std::string, bool>{"max", false}, {"sum", false}, {"mean", true}, {"mean", false}}) {
      std::map<std::string, Attr> attrs = {{"window", g.window},     {"stride", g.stride},
                                           {"padding", g.padding},   {"dilation", g.dilation},
                                           {"reduction", kind},      {"count_include_pad", countPad}};
      std::string name = kind + (kind == "mean" ? (countPad ? " with pad" : " without pad") : "") + " " + g.name;
      list.push_back({"reduce_window " + name, "reduce_window", {x}, {{t, g.y}}, attrs});
      std::vector<Array> backward = {rnd(g.y)};
      if (kind == "max") backward.push_back(x);
      list.push_back({"reduce_window bwd " + name, "reduce_window_backward", backward, {{t, g.x}}, attrs});
    }
  }
  for (std::string op : {"softmax", "log_softmax"}) {
    list.push_back({op + " rows", op, {rnd({7, 10}, -30, 30)}, {{t, {7, 10}}}, {{"axis", int64_t{1}}}});
    list.push_back({op + " 70-wide rows", op, {rnd({4, 70}, -60, 60)}, {{t, {4, 70}}}, {{"axis", int64_t{1}}}});
    list.push_back({op + " first axis", op, {rnd({5, 3, 4}, -3, 3)}, {{t, {5, 3, 4}}}, {{"axis", int64_t{0}}}});
    list.push_back({op + " middle axis", op, {rnd({3, 9, 4})}, {{t, {3, 9, 4}}}, {{"axis", int64_t{1}}}});
  }
  // A user's op (runtime/device/CustomKernels.h), registered here: y = a x + x * x and the
  // integer input's sum, with `a` from the step's attributes; every backend runs the registered
  // kernel on its device's memory (sim: on the stream thread).
  static const bool registered = [] {
    registerCustomKernel("kernel_case.poly", [](const CustomKernelArgs& args) {
      const double a = std::stod(args.attributes.at("a"));
      const CustomTensorView &x = args.inputs[0], &n = args.inputs[1], &y = args.outputs[0];
      int64_t total = 0;
      for (int64_t i = 0; i < n.numel(); ++i) total += n.as<int32_t>()[i];
      for (int64_t i = 0; i < y.numel(); ++i) {
        if (x.dtype == DType::f64) y.as<double>()[i] = a * x.as<double>()[i] + x.as<double>()[i] * x.as<double>()[i];
        else y.as<float>()[i] = float(a * x.as<float>()[i] + x.as<float>()[i] * x.as<float>()[i]);
      }
      args.outputs[1].as<int32_t>()[0] = int32_t(total);
    });
    return true;
  }();
  (void)registered;
  list.push_back({"custom_call", "custom_call", {rnd({3, 5}), Array::of<int32_t>({3}, std::vector<int32_t>{4, -1, 9})},
                  {{t, {3, 5}}, {DType::i32, {1}}},
                  {{"target", std::string("kernel_case.poly")}, {"config", std::string("a=2.5")}}});
  // Ids with repeats (rows 3 and 0 twice), so the backward's sums are exercised.
  Array ids = Array::of<int32_t>({2, 4}, std::vector<int32_t>{3, 0, 6, 3, 1, 0, 2, 5});
  list.push_back({"embedding", "embedding", {rnd({7, 5}), ids}, {{t, {2, 4, 5}}}, {}});
  list.push_back({"embedding bwd", "embedding_backward", {rnd({2, 4, 5}), ids}, {{t, {7, 5}}}, {}});
  // take_along_axis along the middle and the last axis: repeats, and places no index picks.
  {
    std::vector<int32_t> middle(3 * 4 * 5), last(3 * 6 * 2);
    for (size_t i = 0; i < middle.size(); ++i) middle[i] = int32_t(i * 7 % 6 == 5 ? 0 : i * 7 % 6);
    for (size_t i = 0; i < last.size(); ++i) last[i] = int32_t(i * 5 % 7);
    const Array m = Array::of<int32_t>({3, 4, 5}, middle), l = Array::of<int32_t>({3, 6, 2}, last);
    list.push_back({"take_along_axis middle", "take_along_axis", {rnd({3, 6, 5}), m}, {{t, {3, 4, 5}}},
                    {{"axis", int64_t{1}}}});
    list.push_back({"take_along_axis last", "take_along_axis", {rnd({3, 6, 7}), l}, {{t, {3, 6, 2}}},
                    {{"axis", int64_t{2}}}});
    list.push_back({"take_along_axis bwd middle", "take_along_axis_backward", {rnd({3, 4, 5}), m},
                    {{t, {3, 6, 5}}}, {{"axis", int64_t{1}}}});
    list.push_back({"take_along_axis bwd last", "take_along_axis_backward", {rnd({3, 6, 2}), l},
                    {{t, {3, 6, 7}}}, {{"axis", int64_t{2}}}});
    // scatter: repeated indices (the last in index order is written) and places none names.
    list.push_back({"scatter middle", "scatter", {rnd({3, 6, 5}), m, rnd({3, 4, 5})}, {{t, {3, 6, 5}}},
                    {{"axis", int64_t{1}}}});
    list.push_back({"scatter last", "scatter", {rnd({3, 6, 7}), l, rnd({3, 6, 2})}, {{t, {3, 6, 7}}},
                    {{"axis", int64_t{2}}}});
    // scatter_reduce: ties (steps of 0.5) between input and updates (NaN's propagation:
    // ComposedTorchTest.ScatterWritesTheLastUpdateAndOnlyItGetsTheGradient).
    list.push_back({"scatter_reduce max middle ties", "scatter_reduce", {coarse({3, 6, 5}), m, coarse({3, 4, 5})}, {{t, {3, 6, 5}}},
                    {{"axis", int64_t{1}}, {"reduction", std::string("max")}}});
    list.push_back({"scatter_reduce min last ties", "scatter_reduce", {coarse({3, 6, 7}), l, coarse({3, 6, 2})},
                    {{t, {3, 6, 7}}}, {{"axis", int64_t{2}}, {"reduction", std::string("min")}}});
    // Columns of more indices than the library scans (runtime/kernels/TakeAlongAxis.h): sorted
    // first, by counting (100) and by merge passes (300), each place's run found by binary search.
    std::vector<int32_t> longMiddle(2 * 100 * 3), longLast(2 * 300);
    for (size_t i = 0; i < longMiddle.size(); ++i) longMiddle[i] = int32_t((i * 7 + i / 5) % 37);
    for (size_t i = 0; i < longLast.size(); ++i) longLast[i] = int32_t((i * 11 + i / 3) % 40);
    const Array lm = Array::of<int32_t>({2, 100, 3}, longMiddle), ll = Array::of<int32_t>({2, 300}, longLast);
    list.push_back({"take_along_axis bwd 100 a column", "take_along_axis_backward", {rnd({2, 100, 3}), lm},
                    {{t, {2, 37, 3}}}, {{"axis", int64_t{1}}}});
    list.push_back({"scatter 100 a column", "scatter", {rnd({2, 37, 3}), lm, rnd({2, 100, 3})}, {{t, {2, 37, 3}}},
                    {{"axis", int64_t{1}}}});
    list.push_back({"scatter_reduce max 300 a row ties", "scatter_reduce", {coarse({2, 40}), ll, coarse({2, 300})},
                    {{t, {2, 40}}}, {{"axis", int64_t{1}}, {"reduction", std::string("max")}}});
    list.push_back({"scatter 300 a row", "scatter", {rnd({2, 40}), ll, rnd({2, 300})}, {{t, {2, 40}}},
                    {{"axis", int64_t{1}}}});
  }
  // 37 ids, descending with repeats, over 11 of 13 rows: the backward's sort takes six merge
  // passes with a partial last run, and rows 11 and 12 get no id.
  std::vector<int32_t> many(37);
  for (int i = 0; i < 37; ++i) many[i] = (36 - i) * 5 % 11;
  list.push_back({"embedding bwd, 37 ids", "embedding_backward", {rnd({37, 3}), Array::of<int32_t>({37}, many)},
                  {{t, {13, 3}}}, {}});
  // The same ids folded by max and min into the 11 rows they name (steps of 0.5: ties; an empty
  // segment's infinity: ComposedTorchTest.SegmentReductionsGiveEmptySegmentsTheIdentity).
  for (const char* kind : {"max", "min"})
    list.push_back({std::string("segment_reduce ") + kind + ", 37 ids", "segment_reduce",
                    {coarse({37, 3}), Array::of<int32_t>({37}, many)}, {{t, {11, 3}}}, {{"reduction", std::string(kind)}}});
  list.push_back({"slice", "slice", {rnd({4, 6, 5})}, {{t, {2, 3, 5}}}, {{"start", V{1, 2, 0}}, {"limit", V{3, 5, 5}}}});
  list.push_back({"slice i32", "slice", {ids}, {{DType::i32, {1, 2}}}, {{"start", V{1, 1}}, {"limit", V{2, 3}}}});
  list.push_back({"pad", "pad", {rnd({2, 3, 4})}, {{t, {3, 3, 7}}}, {{"low", V{1, 0, 2}}, {"high", V{0, 0, 1}}}});
  // The CPU's pad copies contiguous runs: whole trailing dims (the outer dim padded), runs of one
  // inner row (a middle and the last dim padded), none at all, and an i32 tensor.
  list.push_back({"pad outer", "pad", {rnd({3, 2, 5})}, {{t, {6, 2, 5}}}, {{"low", V{2, 0, 0}}, {"high", V{1, 0, 0}}}});
  list.push_back({"pad rank 5", "pad", {rnd({2, 2, 3, 2, 2})}, {{t, {2, 5, 3, 3, 3}}},
                  {{"low", V{0, 1, 0, 0, 1}}, {"high", V{0, 2, 0, 1, 0}}}});
  list.push_back({"pad none", "pad", {rnd({2, 3})}, {{t, {2, 3}}}, {{"low", V{0, 0}}, {"high", V{0, 0}}}});
  list.push_back({"pad i32", "pad", {ids}, {{DType::i32, {3, 6}}}, {{"low", V{1, 0}}, {"high", V{0, 2}}}});
  list.push_back({"concatenate middle", "concatenate", {rnd({2, 3, 4}), rnd({2, 1, 4}), rnd({2, 2, 4})},
                  {{t, {2, 6, 4}}}, {{"axis", int64_t{1}}}});
  list.push_back({"concatenate last", "concatenate", {rnd({3, 2}), rnd({3, 5})}, {{t, {3, 7}}}, {{"axis", int64_t{1}}}});
  {
    Array mask = rnd({3, 17, 5});
    for (int64_t i = 0; i < mask.numel(); ++i) {
      if (t == DType::f32) mask.values<float>()[i] = mask.values<float>()[i] > 0 ? 1.0f : 0.0f;
      else mask.values<double>()[i] = mask.values<double>()[i] > 0 ? 1.0 : 0.0;
    }
    list.push_back({"select", "select", {mask, rnd({3, 17, 5}), rnd({3, 17, 5})}, {{t, {3, 17, 5}}}, {}});
  }
  DType other = t == DType::f32 ? DType::f64 : DType::f32;
  list.push_back({"convert float", "convert", {rnd({3, 7}, -5, 5)}, {{other, {3, 7}}}, {}});
  list.push_back({"convert to i32", "convert", {rnd({3, 7}, -5, 5)}, {{DType::i32, {3, 7}}}, {}});
  list.push_back({"convert from i32", "convert", {ids}, {{t, {2, 4}}}, {}});
  Array key = Array::of<int32_t>({2}, std::vector<int32_t>{12345, -6789});
  list.push_back({"random_uniform", "random_uniform", {key}, {{t, {3, 17, 5}}}, {}});
  list.push_back({"random_fold_in", "random_fold_in", {key, Array::of<int32_t>({}, std::vector<int32_t>{-3})},
                  {{DType::i32, {2}}}, {}});
  // Fused bodies as spmd-fuse-elementwise lowers them: per-channel broadcast loads, a size-1
  // broadcast, literals, every elementwise kind, two outputs; 5184 elements span many chunks.
  list.push_back({"fused bn-apply relu", "fused", {rnd({4, 16, 9, 9}), rnd({16}), rnd({1, 16, 1, 1})},
                  {{t, {4, 16, 9, 9}}, {t, {4, 16, 9, 9}}},
                  {{"body", std::string("%0 = load 0; %1 = load 1 dims [1]; %2 = mul %0 %1; "
                                        "%3 = load 2 dims [0, 1, 2, 3]; %4 = add %2 %3; %5 = relu %4; "
                                        "%6 = const 0.25; %7 = relu_backward %0 %5; "
                                        "%8 = greater_equal %4 %6; %9 = max %7 %8; %10 = sub %9 %6; "
                                        "yield %5 %10")}}});
  list.push_back({"fused math", "fused", {rnd({3, 17, 5}, -2, 2), rnd({3, 17, 5}, 0.1, 4)},
                  {{t, {3, 17, 5}}},
                  {{"body", std::string("%0 = load 0; %1 = load 1; %2 = exp %0; %3 = log %1; "
                                        "%4 = sqrt %1; %5 = div %2 %4; %6 = neg %3; %7 = add %5 %6; "
                                        "%8 = tanh %7; %9 = sigmoid %0; %10 = gelu %0; "
                                        "%11 = gelu_backward %9 %0; %12 = add %8 %10; %13 = mul %12 %11; "
                                        "yield %13")}}});
  for (auto& c : list) c.name += suffix;
  // Blocked layouts (f32 only: the compiler gives them to f32 activations alone): oneDNN's
  // kernels reading and writing nChw8c / nChw16c, with a buffer in the other block size or plain
  // where a kernel must reorder (runtime/program/Layouts.h lists the ports).
  const std::string b8 = "nChw8c", b16 = "nChw16c";
  if (t == DType::f32) {
    list.push_back({"conv blocked in/out", "conv2d", {rnd({2, 16, 6, 5}), rnd({16, 16, 3, 3}), rnd({16})},
                    {{t, {2, 16, 6, 5}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", "", b8}});
    list.push_back({"conv relu blocked in/out", "conv2d", {rnd({2, 16, 6, 5}), rnd({16, 16, 3, 3}), rnd({16})},
                    {{t, {2, 16, 6, 5}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}, {"relu", true}}, {b8, "", "", b8}});
    list.push_back({"conv 4 groups dilated blocked", "conv2d", {rnd({2, 16, 6, 5}), rnd({16, 4, 3, 3}), rnd({16})},
                    {{t, {2, 16, 6, 5}}},
                    {{"stride", V{1, 1}}, {"padding", V{2, 2}}, {"dilation", V{2, 2}}, {"groups", int64_t{4}}},
                    {b8, "", "", b8}});
    list.push_back({"conv bwd data depthwise blocked", "conv2d_backward_data", {rnd({2, 16, 6, 5}), rnd({16, 1, 3, 3})},
                    {{t, {2, 16, 6, 5}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}, {"groups", int64_t{16}}},
                    {b16, "", b8}});
    list.push_back({"conv bwd filter 2 groups blocked", "conv2d_backward_filter", {rnd({2, 16, 7, 7}), rnd({2, 8, 4, 3})},
                    {{t, {8, 8, 3, 3}}},
                    {{"stride", V{2, 2}}, {"padding", V{1, 1}}, {"dilation", V{1, 2}}, {"groups", int64_t{2}}},
                    {b8, b8, ""}});
    list.push_back({"conv plain in, 16c out", "conv2d", {rnd({2, 3, 9, 9}), rnd({32, 3, 3, 3})},
                    {{t, {2, 32, 5, 5}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {"", "", b16}});
    list.push_back({"conv bwd data blocked", "conv2d_backward_data", {rnd({2, 16, 6, 5}), rnd({16, 8, 3, 3})},
                    {{t, {2, 8, 6, 5}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", b8}});
    list.push_back({"conv bwd filter blocked", "conv2d_backward_filter", {rnd({2, 8, 7, 7}), rnd({2, 16, 4, 4})},
                    {{t, {16, 8, 3, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b8, b16, ""}});
    // A plain activation beside a blocked one at channel counts oneDNN's direct kernels read only
    // blocked (the compiler leaves a pooling's result plain before a convolution): oneDNN's own
    // primitive for these layouts is its reference loops (cpu/SlicedOnednn.cpp copies around it).
    list.push_back({"conv plain 32c in, 16c out", "conv2d", {rnd({2, 32, 7, 6}), rnd({48, 32, 3, 3}, -0.2, 0.2), rnd({48})},
                    {{t, {2, 48, 7, 6}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {"", "", "", b16}});
    list.push_back({"conv bwd data 16c in, plain out", "conv2d_backward_data", {rnd({2, 48, 7, 6}), rnd({48, 32, 3, 3}, -0.2, 0.2)},
                    {{t, {2, 32, 7, 6}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, "", ""}});
    list.push_back({"conv bwd filter plain 32c in, 16c grad", "conv2d_backward_filter", {rnd({2, 32, 7, 6}), rnd({2, 48, 7, 6})},
                    {{t, {48, 32, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {"", b16, ""}});
    // Fused bodies on blocked data broadcasting plain inputs: a per-channel vector, a [1, C, 1, 1]
    // and a pooled [N, C] (the pooling gradient), walked in the blocked order.
    for (const std::string& b : {b8, b16})
      list.push_back({"fused broadcast " + b, "fused", {rnd({3, 32, 5, 7}), rnd({32}), rnd({1, 32, 1, 1}), rnd({3, 32})},
                      {{t, {3, 32, 5, 7}}, {t, {3, 32, 5, 7}}},
                      {{"body", std::string(kBroadcastBody)}},
                      {b, "", "", "", b, b}});
    // Wide 3x3 stride-1 convolutions on blocked activations run as Winograd F(2x2, 3x3)
    // (runtime/cpu/Winograd.h): channels in and out differ (a transposed transform shows), odd
    // and even sizes (partial tiles), both blocks. Filters at the scale of their initialization
    // (fan-in 1152): with unit filters, 1152-term sums leave outputs near zero with an absolute
    // error of 4e-5 in oneDNN's direct kernel too, beyond the f32 tolerance's 1e-5.
    list.push_back({"conv winograd", "conv2d", {rnd({2, 128, 5, 4}), rnd({144, 128, 3, 3}, -0.1, 0.1), rnd({144})},
                    {{t, {2, 144, 5, 4}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", "", b8}});
    list.push_back({"conv winograd 16c, no bias", "conv2d", {rnd({2, 144, 4, 3}), rnd({128, 144, 3, 3}, -0.1, 0.1)},
                    {{t, {2, 128, 4, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, "", b16}});
    list.push_back({"conv bwd data winograd", "conv2d_backward_data", {rnd({2, 144, 5, 4}), rnd({144, 128, 3, 3}, -0.1, 0.1)},
                    {{t, {2, 128, 5, 4}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", b8}});
    list.push_back({"conv bwd filter winograd", "conv2d_backward_filter", {rnd({2, 128, 5, 4}), rnd({2, 144, 5, 4})},
                    {{t, {144, 128, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, b8, ""}});
    list.push_back({"conv bwd filter winograd 16c", "conv2d_backward_filter", {rnd({3, 144, 3, 4}), rnd({3, 128, 3, 4})},
                    {{t, {128, 144, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, b16, ""}});
    // From 16 to 64 channels the forward and backward data run as Winograd a group of 6 tiles at
    // a time: groups across images and a last one part past the end, both blocks, C != K.
    list.push_back({"conv grouped winograd", "conv2d", {rnd({2, 32, 7, 3}), rnd({48, 32, 3, 3}, -0.2, 0.2), rnd({48})},
                    {{t, {2, 48, 7, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, "", "", b16}});
    list.push_back({"conv grouped winograd relu", "conv2d", {rnd({2, 32, 7, 3}), rnd({48, 32, 3, 3}, -0.2, 0.2), rnd({48})},
                    {{t, {2, 48, 7, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}, {"relu", true}}, {b8, "", "", b8}});
    list.push_back({"conv grouped winograd 8c, no bias", "conv2d", {rnd({3, 16, 5, 6}), rnd({16, 16, 3, 3}, -0.2, 0.2)},
                    {{t, {3, 16, 5, 6}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", b8}});
    list.push_back({"conv grouped winograd 2x2", "conv2d", {rnd({5, 16, 2, 2}), rnd({16, 16, 3, 3}, -0.2, 0.2), rnd({16})},
                    {{t, {5, 16, 2, 2}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", "", b8}});
    list.push_back({"conv bwd data grouped winograd", "conv2d_backward_data", {rnd({2, 64, 5, 3}), rnd({64, 16, 3, 3}, -0.2, 0.2)},
                    {{t, {2, 16, 5, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, "", b8}});
    list.push_back({"conv bwd data grouped winograd 16c", "conv2d_backward_data", {rnd({2, 32, 6, 4}), rnd({32, 48, 3, 3}, -0.2, 0.2)},
                    {{t, {2, 48, 6, 4}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, "", b16}});
    // Backward filters up to 128 channels on even sizes too, their images in at most 16 slices
    // (18 images: slices of 2), each slice's groups running past its last tile; from 64 channels
    // in blocks of up to 64 (128 x 96: 2 x 2 blocks of 64 x 48, 3 slices of one image).
    list.push_back({"conv bwd filter grouped winograd", "conv2d_backward_filter", {rnd({3, 16, 6, 6}), rnd({3, 32, 6, 6})},
                    {{t, {32, 16, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, b8, ""}});
    list.push_back({"conv bwd filter grouped winograd 16c", "conv2d_backward_filter", {rnd({2, 32, 4, 8}), rnd({2, 16, 4, 8})},
                    {{t, {16, 32, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, b16, ""}});
    list.push_back({"conv bwd filter grouped winograd 2x2", "conv2d_backward_filter", {rnd({5, 16, 2, 2}), rnd({5, 16, 2, 2})},
                    {{t, {16, 16, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, b8, ""}});
    list.push_back({"conv bwd filter grouped winograd 128c", "conv2d_backward_filter", {rnd({3, 128, 6, 4}), rnd({3, 96, 6, 4}, -0.1, 0.1)},
                    {{t, {96, 128, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b16, b16, ""}});
    list.push_back({"conv bwd filter grouped winograd, 18 images", "conv2d_backward_filter", {rnd({18, 16, 4, 2}), rnd({18, 16, 4, 2})},
                    {{t, {16, 16, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, b8, ""}});
    // The backward filter runs as Winograd from 64 channels on even sizes (the others from 128).
    // The result's gradient at a gradient's scale: with unit ones, some of these 96-term sums
    // cancel to ~3e-3 from terms whose magnitudes add to ~24, and cuDNN's algorithm 1 on an H100
    // was 2.9e-5 off there (1.2e-6 of the magnitude, inside f32's 96 * 2^-24 bound; our
    // Winograd 1.1e-6), beyond the f32 tolerance's 1e-5.
    list.push_back({"conv bwd filter winograd 64c", "conv2d_backward_filter", {rnd({2, 64, 8, 6}), rnd({2, 80, 8, 6}, -0.1, 0.1)},
                    {{t, {80, 64, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {b8, b8, ""}});
    // Wide 3x3 stride-2 convolutions on blocked activations run as GEMMs over their windows
    // (runtime/cpu/StridedConv.h): odd and even sizes (a window past the edge), both blocks.
    list.push_back({"conv stride2 gemm", "conv2d", {rnd({2, 128, 7, 6}), rnd({136, 128, 3, 3}, -0.1, 0.1), rnd({136})},
                    {{t, {2, 136, 4, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b8, "", "", b8}});
    list.push_back({"conv stride2 gemm 16c, no bias", "conv2d", {rnd({3, 144, 6, 5}), rnd({128, 144, 3, 3}, -0.1, 0.1)},
                    {{t, {3, 128, 3, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b16, "", b16}});
    list.push_back({"conv bwd data stride2 gemm", "conv2d_backward_data", {rnd({2, 136, 4, 3}), rnd({136, 128, 3, 3}, -0.1, 0.1)},
                    {{t, {2, 128, 7, 6}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b8, "", b8}});
    list.push_back({"conv bwd data stride2 gemm 16c", "conv2d_backward_data", {rnd({3, 128, 3, 3}), rnd({128, 144, 3, 3}, -0.1, 0.1)},
                    {{t, {3, 144, 6, 5}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b16, "", b16}});
    list.push_back({"conv bwd filter stride2 gemm", "conv2d_backward_filter", {rnd({2, 128, 7, 6}), rnd({2, 136, 4, 3})},
                    {{t, {136, 128, 3, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b8, b8, ""}});
    list.push_back({"conv bwd filter stride2 gemm 16c", "conv2d_backward_filter", {rnd({3, 144, 6, 5}), rnd({3, 128, 3, 3})},
                    {{t, {128, 144, 3, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {b16, b16, ""}});
    // 1x1 stride-2 projections on inputs that are not twice the output's size run there too.
    list.push_back({"conv 1x1 stride2 gemm", "conv2d", {rnd({2, 64, 7, 6}), rnd({136, 64, 1, 1}, -0.2, 0.2), rnd({136})},
                    {{t, {2, 136, 4, 3}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}, {b8, "", "", b8}});
    list.push_back({"conv 1x1 stride2 gemm 16c, no bias", "conv2d", {rnd({3, 144, 7, 5}), rnd({128, 144, 1, 1}, -0.2, 0.2)},
                    {{t, {3, 128, 4, 3}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}, {b16, "", b16}});
    list.push_back({"conv bwd data 1x1 stride2 gemm", "conv2d_backward_data", {rnd({2, 136, 4, 3}), rnd({136, 64, 1, 1}, -0.2, 0.2)},
                    {{t, {2, 64, 7, 6}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}, {b8, "", b8}});
    list.push_back({"conv bwd data 1x1 stride2 gemm 16c", "conv2d_backward_data", {rnd({3, 128, 4, 3}), rnd({128, 144, 1, 1}, -0.2, 0.2)},
                    {{t, {3, 144, 7, 5}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}, {b16, "", b16}});
    list.push_back({"conv bwd filter 1x1 stride2 gemm", "conv2d_backward_filter", {rnd({2, 64, 7, 6}), rnd({2, 136, 4, 3})},
                    {{t, {136, 64, 1, 1}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}, {b8, b8, ""}});
    list.push_back({"conv bwd filter 1x1 stride2 gemm 16c", "conv2d_backward_filter", {rnd({3, 144, 7, 5}), rnd({3, 128, 4, 3})},
                    {{t, {128, 144, 1, 1}}}, {{"stride", V{2, 2}}, {"padding", V{0, 0}}}, {b16, b16, ""}});
    // The filter gradient of a one-channel input with a blocked result gradient (a grey-image
    // stem; runtime/cpu/SingleChannelConv.h): both blocks, strides 1 and 2, padding 1 and 0.
    list.push_back({"conv bwd filter 1 channel", "conv2d_backward_filter", {rnd({3, 1, 9, 7}), rnd({3, 16, 9, 7})},
                    {{t, {16, 1, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {"", b8, ""}});
    list.push_back({"conv bwd filter 1 channel 16c stride 2", "conv2d_backward_filter", {rnd({2, 1, 8, 7}), rnd({2, 32, 4, 4})},
                    {{t, {32, 1, 3, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {"", b16, ""}});
    list.push_back({"conv bwd filter 1 channel, no padding", "conv2d_backward_filter", {rnd({2, 1, 6, 5}), rnd({2, 8, 4, 3})},
                    {{t, {8, 1, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{0, 0}}}, {"", b8, ""}});
    list.push_back({"bn train blocked", "batch_norm_train", {rnd({3, 16, 5, 4}), rnd({16}), rnd({16})},
                    {{t, {3, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b8, "", "", b8}});
    // Conv outputs with a mean far from 0: statistics must not cancel (E[x^2] - E[x]^2 would).
    list.push_back({"bn train blocked, offset data", "batch_norm_train", {rnd({4, 16, 14, 14}, 9, 11), rnd({16}), rnd({16})},
                    {{t, {4, 16, 14, 14}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b8, "", "", b8}});
    list.push_back({"bn train plain, offset data", "batch_norm_train", {rnd({4, 16, 14, 14}, 9, 11), rnd({16}), rnd({16})},
                    {{t, {4, 16, 14, 14}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}});
    list.push_back({"bn train blocked in, plain out", "batch_norm_train", {rnd({3, 16, 5, 4}), rnd({16}), rnd({16})},
                    {{t, {3, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b16}});
    // batch_norm_train's fused relu (spmd-fuse-relu): oneDNN's on blocked data, a pass after on plain.
    list.push_back({"bn train relu blocked", "batch_norm_train", {rnd({3, 16, 5, 4}), rnd({16}), rnd({16})},
                    {{t, {3, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}, {"relu", true}}, {b8, "", "", b8}});
    list.push_back({"bn train relu blocked in, plain out", "batch_norm_train", {rnd({3, 16, 5, 4}), rnd({16}), rnd({16})},
                    {{t, {3, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}, {"relu", true}}, {b16}});
    list.push_back({"bn train masked blocked", "batch_norm_train", {rnd({4, 16, 5, 4}, 9, 11), rnd({16}), rnd({16}), mask(4)},
                    {{t, {4, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b8, "", "", "", b8}});
    list.push_back({"bn train all padding blocked", "batch_norm_train", {rnd({2, 16, 5, 4}), rnd({16}), rnd({16}), Array::zeros(t, {2})},
                    {{t, {2, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b8, "", "", "", b8}});
    list.push_back({"bn train masked relu 16c", "batch_norm_train", {rnd({4, 16, 5, 4}), rnd({16}), rnd({16}), mask(4)},
                    {{t, {4, 16, 5, 4}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}, {"relu", true}}, {b16, "", "", "", b16}});
    list.push_back({"bn bwd masked blocked", "batch_norm_train_backward",
                    {rnd({3, 16, 5, 5}), rnd({3, 16, 5, 5}), rnd({16}), rnd({16}), rnd({16}, 0.5, 2), mask(3)},
                    {{t, {3, 16, 5, 5}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b8, b8, "", "", "", "", b8}});
    list.push_back({"bn infer blocked", "batch_norm_infer",
                    {rnd({3, 16, 5, 4}), rnd({16}), rnd({16}), rnd({16}), rnd({16}, 0.5, 2)},
                    {{t, {3, 16, 5, 4}}}, {{"epsilon", 1e-5}}, {b8, "", "", "", "", b8}});
    list.push_back({"bn bwd blocked", "batch_norm_train_backward",
                    {rnd({2, 16, 5, 5}), rnd({2, 16, 5, 5}), rnd({16}), rnd({16}), rnd({16}, 0.5, 2)},
                    {{t, {2, 16, 5, 5}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {b8, b8, "", "", "", b8}});
    list.push_back({"bn bwd plain grad, blocked input", "batch_norm_train_backward",
                    {rnd({2, 16, 5, 5}), rnd({2, 16, 5, 5}), rnd({16}), rnd({16}), rnd({16}, 0.5, 2)},
                    {{t, {2, 16, 5, 5}}, {t, {16}}, {t, {16}}}, {{"epsilon", 1e-5}}, {"", b8, "", "", "", ""}});
    list.push_back({"reduce_sum per channel blocked", "reduce_sum", {rnd({3, 16, 5, 7})}, {{t, {16}}},
                    {{"axes", V{0, 2, 3}}}, {b8}});
    list.push_back({"reduce_sum per channel blocked chunked", "reduce_sum", {rnd({8, 32, 19, 17})}, {{t, {32}}},
                    {{"axes", V{0, 2, 3}}}, {b16}});
  }
  list.push_back({"relayout to 8c", "relayout", {rnd({2, 16, 3, 5})}, {{t, {2, 16, 3, 5}}}, {}, {"", b8}});
  list.push_back({"relayout from 8c", "relayout", {rnd({2, 16, 3, 5})}, {{t, {2, 16, 3, 5}}}, {}, {b8, ""}});
  list.push_back({"relayout 16c to 8c", "relayout", {rnd({1, 32, 4, 3})}, {{t, {1, 32, 4, 3}}}, {}, {b16, b8}});
  // Statistics of a channel whose mean dwarfs its spread (1000 +- 1), in f64: one-pass sums
  // without a shift would lose about 3e-10 of the variance to cancellation (mean^2 / var ulps),
  // 30 times this case's tolerance. That is 1e-11, not the f64 cases' 1e-12: an ulp of the mean
  // (1.1e-13 at 1000) moves y by 2e-13 (the spread is about 0.58), and the reference and the
  // kernels round the mean's sum differently by a few ulps (1.1e-12 seen on sim). (In f32, y
  // cannot be closer than ulp(mean) / std, 1e-4 here, to the reference: the case would test f32
  // itself, not the kernels.)
  if (t == DType::f64)
    list.push_back({"bn train large mean", "batch_norm_train", {rnd({3, 4, 7, 6}, 999, 1001), rnd({4}), rnd({4})},
                    {{t, {3, 4, 7, 6}}, {t, {4}}, {t, {4}}}, {{"epsilon", 1e-5}}, {}, 1e-11});
  return list;
}

std::vector<KernelCase> channelsLastCases(DType t) {
  std::string suffix = t == DType::f32 ? "/f32" : "/f64";
  uint64_t seed = t == DType::f32 ? 5001 : 6001;
  auto rnd = [&](Shape s, double lo = -1, double hi = 1) { return spmd::testing::randomArray(t, s, seed++, lo, hi); };
  auto mask = [&](int64_t n) { return paddingMask(t, n); };
  using V = std::vector<int64_t>;
  const std::string cl = "nhwc";
  std::vector<KernelCase> list;
  list.push_back({"bn train nhwc", "batch_norm_train", {rnd({3, 6, 5, 4}), rnd({6}), rnd({6})},
                  {{t, {3, 6, 5, 4}}, {t, {6}}, {t, {6}}}, {{"epsilon", 1e-5}, {"relu", true}}, {cl, "", "", cl}});
  list.push_back({"bn train masked nhwc", "batch_norm_train", {rnd({4, 6, 5, 4}, 9, 11), rnd({6}), rnd({6}), mask(4)},
                  {{t, {4, 6, 5, 4}}, {t, {6}}, {t, {6}}}, {{"epsilon", 1e-5}}, {cl, "", "", "", cl}});
  list.push_back({"bn infer nhwc", "batch_norm_infer", {rnd({3, 6, 5, 4}), rnd({6}), rnd({6}), rnd({6}), rnd({6}, 0.5, 2)},
                  {{t, {3, 6, 5, 4}}}, {{"epsilon", 1e-5}}, {cl, "", "", "", "", cl}});
  list.push_back({"bn train bwd masked nhwc", "batch_norm_train_backward",
                  {rnd({4, 6, 5, 4}), rnd({4, 6, 5, 4}), rnd({6}), rnd({6}), rnd({6}, 0.5, 2), mask(4)},
                  {{t, {4, 6, 5, 4}}, {t, {6}}, {t, {6}}}, {{"epsilon", 1e-5}}, {cl, cl, "", "", "", "", cl}});
  list.push_back({"fused broadcast nhwc", "fused", {rnd({3, 6, 5, 7}), rnd({6}), rnd({1, 6, 1, 1}), rnd({3, 6})},
                  {{t, {3, 6, 5, 7}}, {t, {3, 6, 5, 7}}},
                  {{"body", std::string(kBroadcastBody)}},
                  {cl, "", "", "", cl, cl}});
  list.push_back({"conv nhwc in/out", "conv2d", {rnd({2, 6, 6, 5}), rnd({10, 6, 3, 3}), rnd({10})},
                  {{t, {2, 10, 6, 5}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {cl, "", "", cl}});
  list.push_back({"conv relu nhwc in/out", "conv2d", {rnd({2, 6, 6, 5}), rnd({10, 6, 3, 3}), rnd({10})},
                  {{t, {2, 10, 6, 5}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}, {"relu", true}}, {cl, "", "", cl}});
  list.push_back({"conv plain in, nhwc out", "conv2d", {rnd({2, 1, 9, 9}), rnd({8, 1, 3, 3})},
                  {{t, {2, 8, 5, 5}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {"", "", cl}});
  list.push_back({"conv bwd data nhwc", "conv2d_backward_data", {rnd({2, 10, 3, 3}), rnd({10, 6, 3, 3})},
                  {{t, {2, 6, 6, 5}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {cl, "", cl}});
  list.push_back({"conv bwd filter nhwc", "conv2d_backward_filter", {rnd({2, 6, 6, 5}), rnd({2, 10, 6, 5})},
                  {{t, {10, 6, 3, 3}}}, {{"stride", V{1, 1}}, {"padding", V{1, 1}}}, {cl, cl, ""}});
  list.push_back({"conv bwd filter plain x, nhwc dy", "conv2d_backward_filter", {rnd({2, 1, 8, 7}), rnd({2, 8, 4, 4})},
                  {{t, {8, 1, 3, 3}}}, {{"stride", V{2, 2}}, {"padding", V{1, 1}}}, {"", cl, ""}});
  // Reductions walk the channels-last dims by their strides (a bias gradient, global pooling, a
  // maximum over channels, everything): large enough for the two-stage kernels.
  list.push_back({"reduce_sum per channel nhwc", "reduce_sum", {rnd({8, 6, 19, 17})}, {{t, {6}}}, {{"axes", V{0, 2, 3}}}, {cl}});
  list.push_back({"reduce_mean pool nhwc", "reduce_mean", {rnd({3, 6, 5, 7})}, {{t, {3, 6}}}, {{"axes", V{2, 3}}}, {cl}});
  list.push_back({"reduce_max channels nhwc", "reduce_max", {rnd({3, 6, 5, 7})}, {{t, {3, 5, 7}}}, {{"axes", V{1}}}, {cl}});
  list.push_back({"reduce_sum all nhwc", "reduce_sum", {rnd({4, 6, 9, 7})}, {{t, {}}}, {{"axes", V{0, 1, 2, 3}}}, {cl}});
  list.push_back({"relayout to nhwc", "relayout", {rnd({2, 6, 3, 5})}, {{t, {2, 6, 3, 5}}}, {}, {"", cl}});
  list.push_back({"relayout from nhwc", "relayout", {rnd({2, 6, 3, 5})}, {{t, {2, 6, 3, 5}}}, {}, {cl, ""}});
  for (auto& c : list) c.name += suffix;
  return list;
}

std::vector<KernelCase> everyKernelCase(DType t) {
  std::vector<KernelCase> list = kernelCases(t), last = channelsLastCases(t);
  list.insert(list.end(), last.begin(), last.end());
  return list;
}

}  // namespace spmd::runtime
