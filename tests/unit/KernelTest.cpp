// Every CPU kernel against its reference kernel on random inputs (several shapes, odd sizes,
// f32 and f64), with outputs poisoned with NaN first. Tolerance: f32 rtol 1e-4 / atol 1e-5
// (oneDNN reorders sums), f64 rtol 1e-12 / atol 1e-12. Where the CPU backend runs the
// reference loops itself (f64 conv, matmul, BatchNorm, relayout), F64DelegatedKernelsMatchTheir-
// Definitions says where their outside values are.
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "KernelCases.h"
#include "TestUtil.h"
#include "runtime/device/Kernel.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/StridedConv.h"
#include "runtime/cpu/Winograd.h"

namespace spmd::runtime {
namespace {

using spmd::testing::randomArray;

// f32 within 1e-4 relative and 1e-5 absolute unless `atol` says otherwise.
void checkAgainstReference(const KernelCase& c, double atol = 1e-5) {
  SCOPED_TRACE(c.name);
  std::vector<Array> actual = runKernel(cpuKernels(), c);
  std::vector<Array> expected = runKernel(referenceKernels(), plainCase(c));
  for (size_t i = 0; i < expected.size(); ++i) {
    bool f64 = expected[i].dtype == DType::f64;
    double worst = spmd::testing::expectClose(actual[i], expected[i], f64 ? 1e-12 : 1e-4,
                                              f64 ? 1e-12 : atol, c.name + " output " + std::to_string(i));
    std::printf("  %-40s output %zu: max |cpu - reference| = %.3g\n", c.name.c_str(), i, worst);
  }
}

class KernelTest : public ::testing::TestWithParam<DType> {};

TEST_P(KernelTest, CpuMatchesReference) {
  std::set<std::string> covered;
  for (const KernelCase& c : kernelCases(GetParam())) {
    checkAgainstReference(c);
    covered.insert(c.op);
  }
  // Every op with a kernel has at least one case here; collectives need replicas and are
  // compared with their reference kernels in CommunicatorTest.
  const std::set<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter", "ppermute", "all_to_all", "axis_index"};
  for (const auto& [op, _] : cpuKernels())
    if (!collectives.count(op)) {
      EXPECT_TRUE(covered.count(op)) << "no kernel case for " << op;
    }
}

INSTANTIATE_TEST_SUITE_P(DTypes, KernelTest, ::testing::Values(DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtypeName(info.param)); });

// The Winograd convolutions (runtime/cpu/Winograd.cpp, Winograd4x4.cpp) take their tiles in
// chunks, the filter gradient adding each chunk's GEMMs to the last; the kernel cases' shapes fit
// one chunk. With chunks of at most 5 or 3 tiles (F(2x2, 3x3): 16 planes of 144 channels), or 1
// or 3 (F(4x4, 3x3): 36 planes, 4 tiles in the 5x4 cases) they take 2 to 4 (8 tiles in chunks of
// 3: the last part empty).
TEST(KernelTest, WinogradChunksMatchTheReference) {
  for (const auto& [variant, planes, sizes] : {std::tuple{"winograd_chunked", 16, std::vector<int64_t>{5, 3}},
                                               std::tuple{"winograd_4x4", 36, std::vector<int64_t>{1, 3}}}) {
    const std::string v = variant;
    PinnedKernels pin("conv2d:" + v + ",conv2d_backward_data:" + v + ",conv2d_backward_filter:" + v);
    for (int64_t tiles : sizes) {
      SCOPED_TRACE(v + ", chunks of " + std::to_string(tiles) + " tiles");
      const int64_t previous = cpu::winograd::setChunkFloats(planes * 144 * tiles);
      for (const KernelCase& c : kernelCases(DType::f32))
        if (c.name.find("winograd") != std::string::npos) checkAgainstReference(c);
      cpu::winograd::setChunkFloats(previous);
    }
  }
  EXPECT_THROW(cpu::winograd::setChunkFloats(0), Error);
}

// F(4x4, 3x3)'s filter transform streams its result past the caches from 4 MB of it on
// (runtime/cpu/Winograd4x4.cpp's kStreamBytes; the kernel cases' 2.6 MB and less store plainly):
// 256 channels (9.4 MB), forward with a bias and backward data, odd sizes, both blocks. Its
// rounding is looser than the direct kernels' (Winograd4x4.cpp): 2304-term sums of scale ~0.8
// miss by up to ~1.4e-5, so the absolute tolerance is 4e-5 (a lost or misplaced value misses by
// 1e-2 and more).
TEST(KernelTest, WinogradF4x4WithAStreamedFilterTransformMatchesTheReference) {
  PinnedKernels pin("conv2d:winograd_4x4,conv2d_backward_data:winograd_4x4");
  using V = std::vector<int64_t>;
  const DType t = DType::f32;
  const std::map<std::string, Attr> attrs{{"stride", V{1, 1}}, {"padding", V{1, 1}}};
  const Array x = randomArray(t, {2, 256, 5, 6}, 91, -1, 1), w = randomArray(t, {256, 256, 3, 3}, 92, -0.05, 0.05);
  checkAgainstReference({"conv 4x4 streamed", "conv2d", {x, w, randomArray(t, {256}, 93, -1, 1)},
                         {{t, {2, 256, 5, 6}}}, attrs, {"nChw16c", "", "", "nChw16c"}},
                        4e-5);
  checkAgainstReference({"conv bwd data 4x4 streamed", "conv2d_backward_data", {x, w}, {{t, {2, 256, 5, 6}}}, attrs,
                         {"nChw8c", "", "nChw8c"}},
                        4e-5);
}

// The stride-2 GEMM convolutions (runtime/cpu/StridedConv.cpp) take their images in equal
// chunks, the filter gradient adding each chunk's GEMM to the last; the kernel cases fit one.
// With one or two images' windows per chunk they take 2 or 3 (3 images in chunks of 2: the last
// one's second image past the end); the first two sizes split the 1x1 cases' (12 pixels, 144
// columns), the last two the 3x3 ones' (12 pixels, 9 x 144 columns).
TEST(KernelTest, StridedConvolutionChunksMatchTheReference) {
  PinnedKernels pin("conv2d:strided_gemm,conv2d_backward_data:strided_gemm,conv2d_backward_filter:strided_gemm");
  for (int64_t floats : {12 * 144, 2 * 12 * 144, 12 * 9 * 144, 2 * 12 * 9 * 144}) {
    const int64_t previous = cpu::strided::setChunkFloats(floats);
    for (const KernelCase& c : kernelCases(DType::f32))
      if (c.name.find("stride2 gemm") != std::string::npos) checkAgainstReference(c);
    cpu::strided::setChunkFloats(previous);
  }
  EXPECT_THROW(cpu::strided::setChunkFloats(0), Error);
}

// In f64 the CPU backend's conv, conv backward, matmul, BatchNorm and relayout run the reference
// loops (oneDNN has no f64), so for them CpuMatchesReference/f64 and the conformance suite's cpu
// instances compare the reference with itself. Their outside values: TorchReferenceTest
// (PyTorch's f64 autograd on the full-width ResNet-18 and the seed CNNs: conv, both conv
// backwards, matmul, BatchNorm training and its backward, within 1e-9 and 1e-10), and here
// BatchNorm inference and the relayout, which no f64 PyTorch comparison reaches, against their
// definitions.
TEST(KernelTest, F64DelegatedKernelsMatchTheirDefinitions) {
  const DType t = DType::f64;
  Array x = randomArray(t, {2, 3, 4, 5}, 1), scale = randomArray(t, {3}, 2), offset = randomArray(t, {3}, 3),
        mean = randomArray(t, {3}, 4), var = randomArray(t, {3}, 5, 0.5, 2);
  KernelCase bn{"bn infer f64", "batch_norm_infer", {x, scale, offset, mean, var}, {{t, {2, 3, 4, 5}}}, {{"epsilon", 1e-3}}};
  Array y = runKernel(cpuKernels(), bn)[0], expected = Array::zeros(t, x.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = (i / 20) % 3;
    long double xhat = ((long double)x.values<double>()[i] - mean.values<double>()[c]) /
                       sqrtl((long double)var.values<double>()[c] + 1e-3L);
    expected.values<double>()[i] = double(xhat * scale.values<double>()[c] + offset.values<double>()[c]);
  }
  spmd::testing::expectClose(y, expected, 1e-14, 1e-15, "batch_norm_infer f64 against y = (x - mean) / sqrt(var + eps) * scale + offset");
  // nChw8c: element (n, c, h, w) at (((n * C/8 + c/8) * H + h) * W + w) * 8 + c % 8.
  Array plain = randomArray(t, {2, 16, 3, 2}, 6), blocked = Array::zeros(t, plain.shape);
  Step step{"relayout", {}, {}, {}, "KernelTest"};
  TensorView in[] = {{plain.data(), t, plain.shape, ""}};
  TensorView out[] = {{blocked.data(), t, blocked.shape, "nChw8c"}};
  std::shared_ptr<void> cache;
  KernelCall call{step, in, out, cache};
  cpuKernels().at("relayout")(call);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 16; ++c)
      for (int64_t h = 0; h < 3; ++h)
        for (int64_t w = 0; w < 2; ++w)
          ASSERT_EQ(blocked.values<double>()[(((n * 2 + c / 8) * 3 + h) * 2 + w) * 8 + c % 8],
                    plain.values<double>()[((n * 16 + c) * 3 + h) * 2 + w])
              << "relayout f64 of (" << n << ", " << c << ", " << h << ", " << w << ")";
}

// BatchNorm's backward sums (the offset and scale gradients) over 512 values per channel that
// cancel by factors of 100 to 2000, in f32, plain and blocked: within 2 ulps of the exact sum of
// the same f32 inputs (long double). oneDNN's f32-lane sums, which the CPU backend used before,
// are 86 (plain) to 357 (nChw8c) ulps off here.
// batch_norm_train's fused relu keeps the relu op's NaN rule (a NaN stays NaN), though oneDNN's
// fused relu maps NaN to 0: a NaN in channel 3 makes that channel's outputs NaN, every layout;
// the other channels equal the unfused normalization followed by relu.
constexpr float kZero = 0.f;

// Softmax is unchanged by shifting a row, so a row maximum that missed an element would show only
// where the element's exp overflows: rows of 40 (the CPU's maximum folds 16 lanes as vectors, then
// the last 8 one by one) with one logit of 95 among values in [-3, 3], in the vector part (row 0,
// element 20) or the tail (row 1, element 37): the CPU's softmax, log-softmax and cross-entropy match
// the reference's, finite (e^(95 - 3) would be inf in f32).
TEST(KernelTest, SoftmaxRowsFindTheirMaximumInTheVectorPartAndInTheTail) {
  std::vector<float> values(3 * 40);
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(i % 7) - 3;
  values[20] = values[40 + 37] = 95;
  const Array rows = Array::of<float>({3, 40}, values);
  const std::vector<int32_t> classes = {20, 5, 3};
  const Array labels = Array::of<int32_t>({3}, classes);
  const std::vector<KernelCase> cases = {
      {"softmax", "softmax", {rows}, {{DType::f32, {3, 40}}}, {{"axis", int64_t{1}}}},
      {"log_softmax", "log_softmax", {rows}, {{DType::f32, {3, 40}}}, {{"axis", int64_t{1}}}},
      {"cross-entropy", "softmax_cross_entropy", {rows, labels}, {{DType::f32, {3}}}, {}}};
  for (const KernelCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::vector<Array> cpu = runKernel(cpuKernels(), c), reference = runKernel(referenceKernels(), c);
    const auto got = cpu[0].values<float>(), want = reference[0].values<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
      EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "element " << i;
    }
  }
}

TEST(KernelTest, BatchNormReluPropagatesNanAsReluDoes) {
  const int64_t N = 2, C = 16, H = 3, W = 4;
  Array x = randomArray(DType::f32, {N, C, H, W}, 11), scale = randomArray(DType::f32, {C}, 12),
        offset = randomArray(DType::f32, {C}, 13);
  x.values<float>()[(1 * C + 3) * H * W + 5] = std::numeric_limits<float>::quiet_NaN();
  for (const std::string layout : {"", "nChw8c", "nChw16c"}) {
    SCOPED_TRACE(layout.empty() ? "plain" : layout);
    auto run = [&](bool relu) {
      KernelCase c{"bn relu nan", "batch_norm_train", {x, scale, offset},
                   {{DType::f32, {N, C, H, W}}, {DType::f32, {C}}, {DType::f32, {C}}},
                   {{"epsilon", 1e-5}, {"relu", relu}}, {layout, "", "", layout}};
      return runKernel(cpuKernels(), c)[0];
    };
    Array fused = run(true), plain = run(false);
    int nan = 0, differ = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t i = 0; i < H * W; ++i) {
          const int64_t at = (n * C + c) * H * W + i;
          const float got = fused.values<float>()[at], unfused = plain.values<float>()[at];
          if (c == 3) nan += std::isnan(got);
          else differ += got != (unfused <= 0.f ? 0.f : unfused);
        }
    EXPECT_EQ(nan, N * H * W) << "channel 3's outputs must all be NaN";
    EXPECT_EQ(differ, 0) << "the other channels: relu of the unfused normalization";
  }
}

// oneDNN 2.6's batch normalization with given statistics (its JIT kernel on nChw8c, on every ISA)
// of a plain [N, C, H, W] f32 array, relaid to nChw8c and back by the reference relayout.
Array onednnNormalization8c(const Array& x, const Array& scale, const Array& shift, const Array& mean,
                            const Array& var, float epsilon) {
  using namespace dnnl;
  Array in = relaid(x, "", "nChw8c"), out = relaid(x, "", "nChw8c");
  engine cpu(engine::kind::cpu, 0);
  stream queue(cpu);
  const memory::desc data({x.shape[0], x.shape[1], x.shape[2], x.shape[3]}, memory::data_type::f32,
                          memory::format_tag::nChw8c),
      channels({x.shape[1]}, memory::data_type::f32, memory::format_tag::x);
  const auto flags =
      normalization_flags::use_scale | normalization_flags::use_shift | normalization_flags::use_global_stats;
  const batch_normalization_forward::primitive_desc pd(
      batch_normalization_forward::desc(prop_kind::forward_inference, data, epsilon, flags), cpu);
  auto bound = [&](const memory::desc& d, const Array& a) {
    return memory(d, cpu, const_cast<float*>(a.values<float>().data()));
  };
  batch_normalization_forward(pd).execute(
      queue, {{DNNL_ARG_SRC, bound(data, in)}, {DNNL_ARG_DST, bound(data, out)}, {DNNL_ARG_SCALE, bound(channels, scale)},
              {DNNL_ARG_SHIFT, bound(channels, shift)}, {DNNL_ARG_MEAN, bound(channels, mean)},
              {DNNL_ARG_VARIANCE, bound(channels, var)}});
  queue.wait();
  return relaid(out, "nChw8c", "");
}

// batch_norm_train and batch_norm_infer normalize a blocked input in our own pass (oneDNN 2.6's
// stores its output past the caches) and give oneDNN's bits: on nChw8c those of oneDNN's JIT
// normalization with the same statistics (for batch_norm_train, those it returned), relu or not;
// on nChw16c (oneDNN's reference loops on an AVX2-only CPU, which round twice) the nChw8c ones.
// Activations with a mean far from zero, so that every rounding step shows; an odd pixel count.
TEST(KernelTest, BatchNormNormalizesWithOnednnBits) {
  const int64_t N = 3, C = 32, H = 5, W = 7;
  const Array x = randomArray(DType::f32, {N, C, H, W}, 31, 3.0, 9.0), scale = randomArray(DType::f32, {C}, 32),
              offset = randomArray(DType::f32, {C}, 33);
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "relu" : "no relu");
    auto train = [&](const std::string& layout) {
      return runKernel(cpuKernels(), {"bn train", "batch_norm_train", {x, scale, offset},
                                      {{DType::f32, {N, C, H, W}}, {DType::f32, {C}}, {DType::f32, {C}}},
                                      {{"epsilon", 1e-5}, {"relu", relu}}, {layout, "", "", layout}});
    };
    auto infer = [&](const std::string& layout, const std::vector<Array>& trained) {
      return runKernel(cpuKernels(), {"bn infer", "batch_norm_infer", {x, scale, offset, trained[1], trained[2]},
                                      {{DType::f32, {N, C, H, W}}}, {{"epsilon", 1e-5}},
                                      {layout, "", "", "", "", layout}})[0];
    };
    const std::vector<Array> blocked8 = train("nChw8c"), blocked16 = train("nChw16c");
    const Array infer8 = infer("nChw8c", blocked8), infer16 = infer("nChw16c", blocked8);
    const Array oracle = onednnNormalization8c(x, scale, offset, blocked8[1], blocked8[2], 1e-5f);
    const auto want = oracle.values<float>();
    auto differing = [&](const Array& a, bool withRelu) {
      const auto got = a.values<float>();
      int differ = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const float expected = withRelu && !(want[i] > 0.f) ? 0.f : want[i];
        differ += std::memcmp(&got[i], &expected, sizeof(float)) != 0;
      }
      return differ;
    };
    EXPECT_EQ(differing(blocked8[0], relu), 0) << "batch_norm_train nChw8c, of " << want.size() << " values";
    EXPECT_EQ(differing(blocked16[0], relu), 0) << "batch_norm_train nChw16c";
    EXPECT_EQ(differing(infer8, false), 0) << "batch_norm_infer nChw8c";
    EXPECT_EQ(differing(infer16, false), 0) << "batch_norm_infer nChw16c";
    const auto positive = std::count_if(want.begin(), want.end(), [](float v) { return v > 0.f; });
    EXPECT_GT(positive, int64_t(want.size()) / 4) << "the case must normalize to values of both signs";
    EXPECT_LT(positive, 3 * int64_t(want.size()) / 4) << "the case must normalize to values of both signs";
  }
}

// conv2d's fused relu (spmd-fuse-relu) is the relu op after the convolution, NaN rule included:
// a NaN input pixel makes the outputs that read it NaN, and the relu keeps them NaN; everything
// else equals max(0, unfused) bit for bit, on every CPU variant's layout (plain, nChw8c, nChw16c).
TEST(KernelTest, ConvReluIsTheReluOfTheConvolutionNanIncluded) {
  const int64_t N = 2, C = 16, H = 5, W = 6, O = 16;
  Array x = randomArray(DType::f32, {N, C, H, W}, 21), w = randomArray(DType::f32, {O, C, 3, 3}, 22, -0.2, 0.2),
        b = randomArray(DType::f32, {O}, 23);
  x.values<float>()[(1 * C + 3) * H * W + 2 * W + 2] = std::numeric_limits<float>::quiet_NaN();
  for (const std::string layout : {"", "nChw8c", "nChw16c"}) {
    SCOPED_TRACE(layout.empty() ? "plain" : layout);
    auto run = [&](bool relu) {
      KernelCase c{"conv relu nan", "conv2d", {x, w, b}, {{DType::f32, {N, O, H, W}}},
                   {{"stride", std::vector<int64_t>{1, 1}}, {"padding", std::vector<int64_t>{1, 1}}, {"relu", relu}},
                   {layout, "", "", layout}};
      return runKernel(cpuKernels(), c)[0];
    };
    Array fused = run(true), plain = run(false);
    int nan = 0, zero = 0, differ = 0;
    for (int64_t i = 0; i < fused.numel(); ++i) {
      const float got = fused.values<float>()[i], unfused = plain.values<float>()[i];
      if (std::isnan(unfused)) nan += std::isnan(got);
      else differ += std::memcmp(&got, unfused <= 0.f ? &kZero : &unfused, sizeof(float)) != 0;
      zero += got == 0.f;
    }
    EXPECT_EQ(nan, O * 9) << "the 3x3 outputs of every channel that read the NaN pixel stay NaN";
    EXPECT_EQ(differ, 0) << "the others: max(0, unfused), +0 for every non-positive one";
    EXPECT_GT(zero, fused.numel() / 4) << "a relu that zeroes nothing tests nothing";
  }
}

TEST(KernelTest, BatchNormBackwardSumsCancellingTermsExactly) {
  const int64_t N = 8, C = 16, H = 8, W = 8, M = N * H * W;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  Array dy = Array::zeros(DType::f32, {N, C, H, W}), x = Array::zeros(DType::f32, {N, C, H, W});
  for (int64_t c = 0; c < C; ++c) {
    std::vector<double> v(M);
    double mean = 0;
    for (double& e : v) e = u(rng), mean += e / M;
    for (int64_t k = 0; k < M; ++k) {  // centred, plus a small common part: a small sum of big terms
      int64_t n = k / (H * W), i = k % (H * W);
      dy.values<float>()[(n * C + c) * H * W + i] = float(v[k] - mean + 0.004 * (c + 1) / C);
      x.values<float>()[(n * C + c) * H * W + i] = float(u(rng) * 3 + 1);
    }
  }
  Array scale = randomArray(DType::f32, {C}, 7, 0.5, 1.5), mean = Array::zeros(DType::f32, {C}),
        var = Array::zeros(DType::f32, {C});
  for (int64_t c = 0; c < C; ++c) {
    long double s = 0, q = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < H * W; ++i) s += x.values<float>()[(n * C + c) * H * W + i];
    mean.values<float>()[c] = float(s / M);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < H * W; ++i) {
        long double d = x.values<float>()[(n * C + c) * H * W + i] - (long double)mean.values<float>()[c];
        q += d * d;
      }
    var.values<float>()[c] = float(q / M);
  }
  for (const std::string layout : {"", "nChw8c", "nChw16c"}) {
    SCOPED_TRACE(layout.empty() ? "plain" : layout);
    KernelCase c{"bn bwd cancelling", "batch_norm_train_backward", {dy, x, scale, mean, var},
                 {{DType::f32, {N, C, H, W}}, {DType::f32, {C}}, {DType::f32, {C}}}, {{"epsilon", 1e-5}},
                 {layout, layout, "", "", "", layout}};
    std::vector<Array> out = runKernel(cpuKernels(), c);
    double worst = 0, cancellation = 0;
    for (int64_t ch = 0; ch < C; ++ch) {
      long double sum = 0, total = 0, sumXhat = 0;
      const long double rstd = 1.0L / sqrtl((long double)var.values<float>()[ch] + 1e-5L);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < H * W; ++i) {
          long double d = dy.values<float>()[(n * C + ch) * H * W + i];
          sum += d, total += fabsl(d);
          sumXhat += d * ((long double)x.values<float>()[(n * C + ch) * H * W + i] - mean.values<float>()[ch]) * rstd;
        }
      cancellation = std::max(cancellation, double(total / fabsl(sum)));
      for (auto [got, want] : {std::pair{out[2].values<float>()[ch], sum}, std::pair{out[1].values<float>()[ch], sumXhat}}) {
        double ulps = double(fabsl(got - want) / (std::numeric_limits<float>::epsilon() * fabsl(want)));
        worst = std::max(worst, ulps);
        EXPECT_LE(ulps, 2.0) << "channel " << ch << ": " << got << " vs the exact " << double(want);
      }
    }
    std::printf("  %-8s worst %.2f ulps of the exact sums (cancellation up to %.0fx)\n",
                layout.empty() ? "plain" : layout.c_str(), worst, cancellation);
    EXPECT_GT(cancellation, 100) << "the test's sums must cancel";
  }
}

// The mask's meaning, on the reference (the other backends' oracle): batch_norm_train over a
// batch with padding rows masked out gives the examples' statistics and results exactly as the
// batch of the examples alone; its backward, with zero gradients on the padding rows (what a
// masked loss sends), gives the examples alone's gradients and zero on the padding.
TEST(KernelTest, MaskedBatchNormIsTheExamplesAlone) {
  const Shape padded{5, 3, 4, 2}, real{3, 3, 4, 2};
  const int64_t per = 3 * 4 * 2;
  const std::vector<int64_t> rows = {0, 2, 3};  // rows 1 and 4 pad
  Array x = randomArray(DType::f64, padded, 31, -2, 3), dy = randomArray(DType::f64, padded, 32, -1, 1);
  Array scale = randomArray(DType::f64, {3}, 33, 0.5, 1.5), offset = randomArray(DType::f64, {3}, 34);
  Array mask = Array::of<double>({5}, std::vector<double>{1, 0, 1, 1, 0});
  for (int64_t i = 0; i < per; ++i) dy.values<double>()[1 * per + i] = dy.values<double>()[4 * per + i] = 0;
  Array xReal = Array::zeros(DType::f64, real), dyReal = Array::zeros(DType::f64, real);
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t i = 0; i < per; ++i) {
      xReal.values<double>()[r * per + i] = x.values<double>()[rows[r] * per + i];
      dyReal.values<double>()[r * per + i] = dy.values<double>()[rows[r] * per + i];
    }
  auto f64 = [](Shape s) { return std::pair{DType::f64, s}; };
  const std::map<std::string, Attr> eps{{"epsilon", 1e-5}};
  auto masked = runKernel(referenceKernels(), {"masked", "batch_norm_train", {x, scale, offset, mask},
                                               {f64(padded), f64({3}), f64({3})}, eps});
  auto alone = runKernel(referenceKernels(), {"alone", "batch_norm_train", {xReal, scale, offset},
                                              {f64(real), f64({3}), f64({3})}, eps});
  for (int o : {1, 2}) spmd::testing::expectClose(masked[o], alone[o], 1e-14, 1e-14, "statistic " + std::to_string(o));
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t i = 0; i < per; ++i)
      EXPECT_NEAR(masked[0].values<double>()[rows[r] * per + i], alone[0].values<double>()[r * per + i], 1e-13);
  auto backMasked = runKernel(referenceKernels(), {"masked bwd", "batch_norm_train_backward",
                                                   {dy, x, scale, masked[1], masked[2], mask},
                                                   {f64(padded), f64({3}), f64({3})}, eps});
  auto backAlone = runKernel(referenceKernels(), {"alone bwd", "batch_norm_train_backward",
                                                  {dyReal, xReal, scale, alone[1], alone[2]},
                                                  {f64(real), f64({3}), f64({3})}, eps});
  for (int o : {1, 2}) spmd::testing::expectClose(backMasked[o], backAlone[o], 1e-13, 1e-13, "gradient " + std::to_string(o));
  double largest = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (int64_t i = 0; i < per; ++i) {
      const double want = backAlone[0].values<double>()[r * per + i];
      EXPECT_NEAR(backMasked[0].values<double>()[rows[r] * per + i], want, 1e-12);
      largest = std::max(largest, std::abs(want));
    }
  for (int64_t i = 0; i < per; ++i)
    for (int64_t pad : {1, 4}) EXPECT_EQ(backMasked[0].values<double>()[pad * per + i], 0.0) << "padding row " << pad;
  EXPECT_GT(largest, 0.1) << "the examples' input gradients must not be near zero";
  // A replica holding padding alone (every weight 0): mean 0, variance 1, finite results.
  auto none = runKernel(referenceKernels(), {"no examples", "batch_norm_train", {x, scale, offset, Array::zeros(DType::f64, {5})},
                                             {f64(padded), f64({3}), f64({3})}, eps});
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_EQ(none[1].values<double>()[c], 0.0);
    EXPECT_EQ(none[2].values<double>()[c], 1.0);
  }
  for (double v : none[0].values<double>()) EXPECT_TRUE(std::isfinite(v));
}

// The reference relayout (the harness's oracle for blocked layouts) puts element (n, c, h, w) at
// oneDNN's nChw8c offset: channel blocks outermost after n, the 8 channels of a block innermost.
TEST(KernelTest, ReferenceRelayoutFollowsOnednnBlockedOrder) {
  Array x = Array::zeros(DType::f32, {2, 16, 3, 2});
  for (int64_t i = 0; i < x.numel(); ++i) x.values<float>()[i] = float(i);
  Array blocked = relaid(x, "", "nChw8c");
  auto plainAt = [](int64_t n, int64_t c, int64_t h, int64_t w) { return float(((n * 16 + c) * 3 + h) * 2 + w); };
  // (n=1, c=11, h=2, w=1): block 1 of n=1, then h, w, then lane 3 of the block.
  EXPECT_EQ(blocked.values<float>()[(((1 * 2 + 1) * 3 + 2) * 2 + 1) * 8 + 3], plainAt(1, 11, 2, 1));
  EXPECT_EQ(blocked.values<float>()[0 * 8 + 7], plainAt(0, 7, 0, 0));
  Array back = relaid(blocked, "nChw8c", "");
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(back.values<float>()[i], x.values<float>()[i]) << i;
  EXPECT_NE(spmd::testing::errorOf([&] { relaid(x, "", "nChw4c"); }).find("unknown tensor layout 'nChw4c'"),
            std::string::npos);
}

// The CPU reductions cut their rows into chunks by the shape alone and add the partial results
// in chunk order, so one thread and several give the same bits; so do the one-channel filter
// gradient (per-image sums added in image order) and the grouped Winograd filter gradient (slices
// of images fixed by the batch, added in slice order).
TEST(KernelTest, ReductionsGiveTheSameBitsOnAnyThreadCount) {
  const int threads = omp_get_max_threads();
  int chunked = 0;
  for (const KernelCase& c : kernelCases(DType::f32)) {
    if (c.name.find("chunked") == std::string::npos && c.name.find("1 channel") == std::string::npos &&
        c.name.find("bwd filter grouped") == std::string::npos)
      continue;
    SCOPED_TRACE(c.name);
    chunked++;
    // The convolutions' thread-invariant variants (others may be timed faster on one count).
    PinnedKernels pin(c.name.find("1 channel") != std::string::npos ? "conv2d_backward_filter:single_channel"
                                                                     : "conv2d_backward_filter:winograd_grouped");
    omp_set_num_threads(1);
    std::vector<Array> one = runKernel(cpuKernels(), c);
    omp_set_num_threads(3);
    std::vector<Array> three = runKernel(cpuKernels(), c);
    omp_set_num_threads(threads);
    ASSERT_EQ(one[0].bytes(), three[0].bytes());
    EXPECT_EQ(std::memcmp(one[0].data(), three[0].data(), one[0].bytes()), 0);
  }
  EXPECT_EQ(chunked, 14);
}

TEST(KernelTest, ReferenceCatchesOutOfRangeLabel) {
  KernelCase c{"bad label", "softmax_cross_entropy",
               {randomArray(DType::f32, {2, 3}, 5), Array::of<int32_t>({2}, std::vector<int32_t>{1, 3})},
               {{DType::f32, {2}}}, {}};
  for (const KernelTable* table : {&cpuKernels(), &referenceKernels()})
    EXPECT_THROW(
        {
          try {
            runKernel(*table, c);
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("label 3 at row 1 is out of range [0, 3)"), std::string::npos) << e.what();
            throw;
          }
        },
        Error);
}

}  // namespace
}  // namespace spmd::runtime
