// The CUDA backend. Without a GPU (CI): the fused-kernel generator's CUDA C compiles with NVRTC
// for sm_90 for every fused step of a ResNet-18 training step, NVRTC errors are clear, and cuda
// device lists fail with a message saying why. Every kernel case of KernelCases.h against the
// reference kernels on the host (f32 rtol 1e-4 / atol 1e-5 without TF32, f64 1e-12 or the case's own), and the
// convolutions again pinned to the GEMM variant: on sim always, on the GPU when there is one; with a GPU, a bad label reported as on the CPU. GPU tests skip, saying why, when none is seen.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include "KernelCases.h"
#include "TestUtil.h"
#include "benchmarks/TrainStep.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/FusedBody.h"
#include "runtime/kernels/FusedSource.h"
#ifdef SPMD_WITH_CUDA
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudnnGraph.h"
#include "runtime/cuda/Nvrtc.h"
#include "frontend/models/ResNet.h"
#endif

namespace spmd::runtime {
namespace {

std::string gpuMissing() {
  std::string why;
  return availableDevices("cuda", &why) > 0 ? "" : why;
}

bool cudaBuilt() {
  auto names = driverNames();
  return std::find(names.begin(), names.end(), "cuda") != names.end();
}

using spmd::testing::errorOf;

TEST(CudaTest, GeneratedSourceBakesShapesAndBroadcastIndexing) {
  FusedBody body = FusedBody::parse("%0 = load 0; %1 = load 1 dims [1]; %2 = const 0.5; %3 = mul %1 %2; "
                                    "%4 = add %0 %3; %5 = relu %4; yield %5 %4");
  std::vector<int64_t> space{2, 3, 4};
  std::string source = kernels::fusedKernelSource(body, DType::f32, {{2, 3, 4}, {3}}, space, 2);
  EXPECT_NE(source.find("typedef float T;"), std::string::npos) << source;
  EXPECT_NE(source.find("const T v0 = in0[i];"), std::string::npos) << source;
  // channel c of [2, 3, 4] is (i / 4) % 3; the [3] input has stride 1; 24 elements index in 32 bits.
  EXPECT_NE(source.find("for (unsigned i = "), std::string::npos) << source;
  EXPECT_NE(source.find("const T v1 = in1[0 + ((i / 4u) % 3u) * 1LL];"), std::string::npos) << source;
  // 2^31 elements or more: 64-bit.
  const std::string wide = kernels::fusedKernelSource(body, DType::f32, {{2, 3, int64_t(1) << 30}, {3}},
                                                      std::vector<int64_t>{2, 3, int64_t(1) << 30}, 2);
  EXPECT_NE(wide.find("for (long long i = "), std::string::npos) << wide;
  EXPECT_NE(wide.find("const T v1 = in1[0 + ((i / 1073741824LL) % 3LL) * 1LL];"), std::string::npos) << wide;
  EXPECT_NE(source.find("const T v2 = T(0.5);"), std::string::npos) << source;
  EXPECT_NE(source.find("const T v5 = ew::Relu::apply(v4, v4);"), std::string::npos) << source;
  // The functors come with the source: the elementwise table's formulas, not a CUDA copy of them.
  EXPECT_NE(source.find("X(relu, Relu, 1, reluOf(a))"), std::string::npos) << source;
  EXPECT_NE(source.find("inline T reluOf(T x) { return x <= T(0) ? T(0) : x; }"), std::string::npos) << source;
  EXPECT_NE(source.find("out0[i] = v5;"), std::string::npos) << source;
  EXPECT_NE(source.find("out1[i] = v4;"), std::string::npos) << source;
  EXPECT_NE(errorOf([&] { kernels::fusedKernelSource(body, DType::f32, {{2, 3, 4}, {4}}, space, 2); })
                .find("input dim 0 cannot map to result dim 1"),
            std::string::npos);
}

// Literals of every kind reach the generated CUDA C: the shortest round-trip decimal converted to
// T as the CPU kernel converts the double, infinities and NaN by their bit patterns, and the
// max that keeps NaN. (The generated source compiling with NVRTC is checked below.)
TEST(CudaTest, GeneratedSourceCarriesSpecialLiterals) {
  FusedBody body = FusedBody::parse("%0 = load 0; %1 = const -inf; %2 = const nan; %3 = const 0.1; "
                                    "%4 = const inf; %5 = max %0 %1; yield %5 %2 %3 %4");
  std::string f32 = kernels::fusedKernelSource(body, DType::f32, {{4}}, std::vector<int64_t>{4}, 4);
  EXPECT_NE(f32.find("const T v1 = __int_as_float(0xff800000);"), std::string::npos) << f32;
  EXPECT_NE(f32.find("const T v2 = __int_as_float(0x7fc00000);"), std::string::npos) << f32;
  EXPECT_NE(f32.find("const T v3 = T(0.1);"), std::string::npos) << f32;
  EXPECT_NE(f32.find("const T v4 = __int_as_float(0x7f800000);"), std::string::npos) << f32;
  EXPECT_NE(f32.find("const T v5 = ew::Max::apply(v0, v1);"), std::string::npos) << f32;
  std::string f64 = kernels::fusedKernelSource(body, DType::f64, {{4}}, std::vector<int64_t>{4}, 4);
  EXPECT_NE(f64.find("__longlong_as_double(0xfff0000000000000LL)"), std::string::npos) << f64;
  EXPECT_NE(f64.find("__longlong_as_double(0x7ff8000000000000LL)"), std::string::npos) << f64;
#ifdef SPMD_WITH_CUDA
  for (const std::string& source : {f32, f64})
    EXPECT_NE(cuda::compileCuda(source, "compute_90").find(".entry spmd_fused"), std::string::npos) << source;
#endif
}

#ifdef SPMD_WITH_CUDA
// Every op of the elementwise table, in one fused body, compiles with NVRTC in f32 and f64: the
// embedded table and its functors are valid device code for each row.
TEST(CudaTest, EveryElementwiseOpCompilesWithNvrtc) {
  std::string text = "%0 = load 0; %1 = load 1", yields;
  int next = 2;
#define SPMD_OP_STATEMENT(name, Functor, arity, ...)                                   \
  text += "; %" + std::to_string(next) + " = " #name + (arity == 2 ? " %0 %1" : " %0"); \
  yields += " %" + std::to_string(next++);
  SPMD_ELEMENTWISE_OPS(SPMD_OP_STATEMENT)
#undef SPMD_OP_STATEMENT
  FusedBody body = FusedBody::parse(text + "; yield" + yields);
  ASSERT_GT(body.results.size(), 10u);
  for (DType dtype : {DType::f32, DType::f64}) {
    std::string source = kernels::fusedKernelSource(body, dtype, {{8}, {8}}, std::vector<int64_t>{8}, body.results.size());
    EXPECT_NE(cuda::compileCuda(source, "compute_90").find(".entry spmd_fused"), std::string::npos) << source;
  }
}

// Every fused step of a reduced-width ResNet-18 SGD step, as compiled for the CUDA backend (on
// sim), with plain and with channels-last activations (SPMD_CHANNELS_LAST=1), and in mixed
// precision (bf16 operands and roundings in the bodies), compiles to PTX for sm_90 (NVRTC needs
// no GPU), and the second compile of a source comes from the cache.
TEST(CudaTest, EveryFusedStepOfATrainStepCompilesWithNvrtc) {
  const testing::ScratchDir scratch("spmd-cuda-test-kernels");
  const std::filesystem::path cache = scratch.path();
  setenv("SPMD_KERNEL_CACHE", cache.c_str(), 1);
  auto model = models::resnet18({.width = 4});
  auto [params, state] = model->initialize(3);
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9, .weightDecay = 5e-4});
  auto [x, y] = bench::syntheticBatch(4);
  std::set<std::string> sources;
  for (auto [channelsLast, compute] : {std::pair{false, DType::f32}, {true, DType::f32}, {false, DType::bf16}}) {
    if (channelsLast) setenv("SPMD_CHANNELS_LAST", "1", 1);  // read when the first call compiles
    auto step = jit(bench::trainStep(*model, sgd, compute), {.devices = "sim"});
    step(params, sgd.init(params), state, x, y);
    unsetenv("SPMD_CHANNELS_LAST");
    const Program& program = step.lastProgram();
    int compiled = 0, segmented = 0, nhwc = 0, bf16 = 0;
    for (const Step& s : program.steps) {
      if (s.op != "fused") continue;
      bf16 += s.text("body").find("round_bf16") != std::string::npos;
      segmented += s.attrs.count("segments") > 0;
      nhwc += program.buffers.at(size_t(s.outputs.at(0))).layout == "nhwc";
      std::string source = kernels::fusedKernelSource(s, program);  // the optimizer's update: one of several segments
      std::string ptx = cuda::compileCuda(source, "compute_90");
      EXPECT_NE(ptx.find(".entry spmd_fused"), std::string::npos) << source;
      sources.insert(source);
      ++compiled;
    }
    std::printf("  %d fused steps (%d channels-last), compiled by NVRTC %s to PTX\n", compiled, nhwc,
                cuda::nvrtcVersionString().c_str());
    EXPECT_GT(compiled, 20);
    if (compute == DType::f32)
      EXPECT_EQ(segmented, 1) << "the optimizer's update: one kernel of one segment per parameter";
    else
      EXPECT_GT(segmented, 1) << "the update, and runs of adjacent roundings with one body (the weights')";
    EXPECT_EQ(nhwc > 10, channelsLast) << nhwc << " fused steps write channels-last";
    EXPECT_EQ(bf16 > 10, compute == DType::bf16) << bf16 << " fused steps round to bf16";
  }
  size_t files = 0;  // beside them: the CPU's kernel choices (kernel-choices.json)
  for (const auto& entry : std::filesystem::directory_iterator(cache)) files += entry.path().extension() == ".ptx";
  EXPECT_EQ(files, sources.size()) << "one cached PTX per distinct kernel";
  EXPECT_NE(cuda::compileCuda(*sources.begin(), "compute_90").find(".entry spmd_fused"), std::string::npos);

  std::string bad = "extern \"C\" __global__ void spmd_fused() { undefined_thing(); }";
  std::string message = errorOf([&] { cuda::compileCuda(bad, "compute_90"); });
  EXPECT_NE(message.find("NVRTC could not compile a generated kernel for compute_90"), std::string::npos) << message;
  EXPECT_NE(message.find("undefined_thing"), std::string::npos) << message;
  unsetenv("SPMD_KERNEL_CACHE");
}
#endif

TEST(CudaTest, CudaDeviceListsSayWhyWhenTheyCannotRun) {
  std::string why;
  if (availableDevices("cuda", &why) > 0) {
    EXPECT_EQ(parseDeviceList("cuda:0*3").devices, (std::vector<int>{0, 0, 0}));
    EXPECT_NE(errorOf([] { parseDeviceList("cuda:99"); }).find("names GPU 99 but"), std::string::npos);
  } else {
    std::string message = errorOf([] { parseDeviceList("cuda:0*2"); });
    EXPECT_TRUE(message.find("no CUDA GPU is visible") != std::string::npos ||
                message.find("has no cuda backend") != std::string::npos)
        << message;
    EXPECT_TRUE(message.find("use cpu:N or sim:N instead") != std::string::npos ||
                message.find("use a backend this build has instead: cpu, cpu:N") != std::string::npos)
        << message;
  }
  if (cudaBuilt()) {
    EXPECT_NE(errorOf([] { parseDeviceList("cuda:"); }).find("is empty"), std::string::npos);
  }
}

// A cuda device list goes through the device layer to the CUDA backend's own code, here and in
// jit and pmap: without a GPU it fails where a driver is needed, with the CUDA runtime's error.
TEST(CudaTest, CudaDeviceListsReachTheCudaBackend) {
  if (!cudaBuilt()) GTEST_SKIP() << "this build has no CUDA backend";
  std::string why;
  if (availableDevices("cuda", &why) > 0) GTEST_SKIP() << "a GPU is visible; the conformance suite runs on it";
  EXPECT_NE(why.find("cudaError"), std::string::npos) << why;
  for (const std::string& message :
       {errorOf([] { parseDeviceList("cuda:0"); }),
        errorOf([] { spmd::jit([](const Tensor& x) { return x; }, {.devices = "cuda:0"}); }),
        errorOf([] { spmd::pmap([](const Tensor& x) { return x; }, {.devices = "cuda:0*2"}); })}) {
    EXPECT_NE(message.find("no CUDA GPU is visible (cudaError"), std::string::npos) << message;
    EXPECT_NE(message.find("use cpu:N or sim:N"), std::string::npos) << message;
  }
}

// The CUDA kernel code on a device: every kernel case of KernelCases.h against the reference
// kernels on the host, each case run twice (the first run searches algorithms and compiles with
// NVRTC on a GPU). Cases written for the CPU backend's blocked layouts run in their plain form,
// since these devices keep every tensor plain (a relayout has nothing to do there; the
// executor refusing blocked programs is ConformanceTest's). On sim (always, CI included), the
// same functors the CUDA kernels run; on cuda:0 when a GPU is visible.
struct KernelRun {
  std::string backend;
  DType dtype;
};
void PrintTo(const KernelRun& r, std::ostream* os) { *os << r.backend << " " << dtypeName(r.dtype); }

class CudaKernelTest : public ::testing::TestWithParam<KernelRun> {};

TEST_P(CudaKernelTest, EveryKernelMatchesTheReference) {
  const auto& [backend, dtype] = GetParam();
  if (backend == "cuda")
    if (std::string why = gpuMissing(); !why.empty()) GTEST_SKIP() << "no GPU for the CUDA kernel tests: " << why;
  std::shared_ptr<Device> device = makeDevice(parseDeviceList(backend), 0);
  ASSERT_FALSE(device->readsLayout("nChw8c")) << "the CUDA kernels read plain and channels-last tensors only";
  ASSERT_TRUE(device->readsLayout("nhwc"));
  std::set<std::string> covered;
  for (const KernelCase& given : everyKernelCase(dtype)) {
    // Channels-last cases as they are (cuDNN's NHWC convolutions on cuda), the CPU's blocked ones plain.
    const bool asGiven = given.readBy(*device);
    if (given.op == "relayout" && !asGiven) continue;
    KernelCase c = asGiven ? given : plainCase(given);
    SCOPED_TRACE(c.name + " on " + device->name());
    Executor executor(oneStepProgram(c, "CudaTest"), device);
    if (c.op == "custom_call" && backend == "cuda") {  // host kernels only: refused, saying so
      const std::string error = spmd::testing::errorOf([&] { executor.run(c.inputs); });
      EXPECT_NE(error.find("has a host kernel only; give its registration a CUDA kernel"), std::string::npos) << error;
      covered.insert(c.op);
      continue;
    }
    const std::vector<Array> inputs = inputsInLayout(c);
    executor.run(inputs);
    std::vector<Array> actual = executor.run(inputs);
    outputsToPlain(c, actual);
    std::vector<Array> expected = runKernel(referenceKernels(), plainCase(c));
    // cuDNN's timed choice may transform (Winograd, FFT): f32 convolutions are held to 1e-5 of
    // the sum of their terms' sizes as well.
    std::vector<Array> magnitude;
    if (c.op.rfind("conv2d", 0) == 0 && dtype == DType::f32) {
      KernelCase sizes = plainCase(c);
      for (Array& a : sizes.inputs)
        for (float& v : a.values<float>()) v = std::fabs(v);
      magnitude = runKernel(referenceKernels(), sizes);
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      bool f64 = expected[i].dtype == DType::f64;
      double worst = spmd::testing::expectClose(actual[i], expected[i], f64 ? c.f64Tolerance : 1e-4, f64 ? c.f64Tolerance : 1e-5,
                                                c.name + " output " + std::to_string(i),
                                                magnitude.empty() ? nullptr : &magnitude[i], 1e-5);
      if (backend == "cuda")
        std::printf("  %-40s output %zu: max |cuda - reference| = %.3g\n", c.name.c_str(), i, worst);
    }
    covered.insert(c.op);
  }
  const std::set<std::string> skipped = {"all_reduce", "all_gather", "reduce_scatter", "ppermute", "all_to_all", "axis_index"};
  for (const auto& [op, _] : device->kernels())
    if (!skipped.count(op)) { EXPECT_TRUE(covered.count(op)) << "no kernel case for " << op; }
}

// The convolution variant "gemm" (runtime/kernels/ConvGemm.h), pinned, on every convolution
// case and on geometries the cases lack (unequal strides, padding and filter sides; a 1x1 stride-1
// filter; one image): against the reference, and the step says it ran. On sim, the unfolding
// kernels the GPU runs and the GEMM arguments it gives cuBLAS, with a stand-in GEMM, the batch in
// chunks of 16 KiB of scratch (most cases in several, "conv 17 images" in 3-image chunks and a
// shorter last one); on cuda:0, cuBLAS itself.
TEST_P(CudaKernelTest, ConvolutionsPinnedToTheGemmVariantMatchTheReference) {
  const auto& [backend, dtype] = GetParam();
  if (backend == "cuda")
    if (std::string why = gpuMissing(); !why.empty()) GTEST_SKIP() << "no GPU for the CUDA kernel tests: " << why;
  std::shared_ptr<Device> device = makeDevice(parseDeviceList(backend), 0);
  PinnedKernels pin("conv2d:gemm,conv2d_backward_data:gemm,conv2d_backward_filter:gemm");
  std::vector<KernelCase> cases;
  for (const KernelCase& c : kernelCases(dtype))
    if (plainConvolution(c)) cases.push_back(plainCase(c));
  uint64_t seed = 77;
  auto rnd = [&](Shape s) { return spmd::testing::randomArray(dtype, s, seed++, -1, 1); };
  using V = std::vector<int64_t>;
  const std::map<std::string, Attr> odd = {{"stride", V{2, 1}}, {"padding", V{0, 2}}};
  // x [2, 3, 8, 9], filter [4, 3, 2, 3]: y [2, 4, 4, 11].
  cases.push_back({"conv 2x3 stride 2,1 pad 0,2", "conv2d", {rnd({2, 3, 8, 9}), rnd({4, 3, 2, 3}), rnd({4})},
                   {{dtype, {2, 4, 4, 11}}}, odd});
  cases.push_back({"conv bwd data 2x3 stride 2,1 pad 0,2", "conv2d_backward_data", {rnd({2, 4, 4, 11}), rnd({4, 3, 2, 3})},
                   {{dtype, {2, 3, 8, 9}}}, odd});
  cases.push_back({"conv bwd filter 2x3 stride 2,1 pad 0,2", "conv2d_backward_filter", {rnd({2, 3, 8, 9}), rnd({2, 4, 4, 11})},
                   {{dtype, {4, 3, 2, 3}}}, odd});
  const std::map<std::string, Attr> plain = {{"stride", V{1, 1}}, {"padding", V{0, 0}}};
  cases.push_back({"conv 1x1 one image", "conv2d", {rnd({1, 5, 3, 4}), rnd({7, 5, 1, 1})}, {{dtype, {1, 7, 3, 4}}}, plain});
  cases.push_back({"conv bwd data 1x1 one image", "conv2d_backward_data", {rnd({1, 7, 3, 4}), rnd({7, 5, 1, 1})},
                   {{dtype, {1, 5, 3, 4}}}, plain});
  int checked = 0;
  for (const KernelCase& c : cases) {
    SCOPED_TRACE(c.name + " on " + device->name());
    Executor executor(oneStepProgram(c, "CudaTest"), device);
    executor.run(c.inputs);
    const std::vector<Array> actual = executor.run(c.inputs);
    EXPECT_EQ(executor.variantOf(0).substr(0, 5), "gemm:") << executor.variantOf(0);
    const std::vector<Array> expected = runKernel(referenceKernels(), c);
    const bool f64 = dtype == DType::f64;
    spmd::testing::expectClose(actual[0], expected[0], f64 ? 1e-12 : 1e-4, f64 ? 1e-12 : 1e-5, c.name);
    ++checked;
  }
  EXPECT_GE(checked, 24);  // 19 convolution kernel cases in f64, more in f32
}

// The GEMM variant on bf16 operands (products summed in f32, each result rounded to bf16 once):
// every f32 convolution case with its inputs rounded to bf16, against the same variant's f32
// result on those inputs, rounded. On sim the stand-in GEMM sums alike in both, so the bits are
// the rounded f32 result's; on a GPU cuBLAS's bf16 and f32 GEMMs sum in their own orders: within
// one bf16 step (2^-7 of the value, and of 1e-3).
TEST_P(CudaKernelTest, Bf16ConvolutionsPinnedToTheGemmVariantRoundTheF32ResultOnce) {
  const auto& [backend, dtype] = GetParam();
  if (dtype != DType::f32) GTEST_SKIP() << "bf16 runs once, with the f32 runs";
  if (backend == "cuda")
    if (std::string why = gpuMissing(); !why.empty()) GTEST_SKIP() << "no GPU for the CUDA kernel tests: " << why;
  std::shared_ptr<Device> device = makeDevice(parseDeviceList(backend), 0);
  PinnedKernels pin("conv2d:gemm,conv2d_backward_data:gemm,conv2d_backward_filter:gemm");
  auto convert = [](const Array& a, DType to) {
    Array out = Array::zeros(to, a.shape);
    for (int64_t i = 0; i < a.numel(); ++i)
      if (to == DType::bf16) out.values<bf16>()[i] = toBf16(a.values<float>()[i]);
      else out.values<float>()[i] = fromBf16(a.values<bf16>()[i]);
    return out;
  };
  int checked = 0;
  for (const KernelCase& f32Case : kernelCases(DType::f32)) {
    if (!plainConvolution(f32Case)) continue;
    KernelCase wide = plainCase(f32Case), narrow = wide;
    for (size_t i = 0; i < wide.inputs.size(); ++i) {
      narrow.inputs[i] = convert(wide.inputs[i], DType::bf16);
      wide.inputs[i] = convert(narrow.inputs[i], DType::f32);  // the bf16 values, exactly
    }
    narrow.outputs[0].first = DType::bf16;
    SCOPED_TRACE(narrow.name + " in bf16 on " + device->name());
    Executor f32Run(oneStepProgram(wide, "CudaTest"), device), bf16Run(oneStepProgram(narrow, "CudaTest"), device);
    const Array want = convert(convert(f32Run.run(wide.inputs)[0], DType::bf16), DType::f32);
    const Array got = convert(bf16Run.run(narrow.inputs)[0], DType::f32);
    EXPECT_EQ(bf16Run.variantOf(0).substr(0, 5), "gemm:") << bf16Run.variantOf(0);
    if (backend == "sim")
      spmd::testing::expectClose(got, want, 0, 0, narrow.name);
    else
      spmd::testing::expectClose(got, want, 0x1p-7, 1e-3, narrow.name);
    ++checked;
  }
  EXPECT_GE(checked, 15);
}

std::vector<KernelRun> kernelRuns() {
  std::vector<KernelRun> runs;
  for (const char* backend : {"sim", "cuda"})
    for (DType dtype : {DType::f32, DType::f64})
      if (std::string(backend) == "sim" || cudaBuilt()) runs.push_back({backend, dtype});
  return runs;
}
INSTANTIATE_TEST_SUITE_P(Devices, CudaKernelTest, ::testing::ValuesIn(kernelRuns()), [](const auto& info) {
  return info.param.backend + "_" + std::string(dtypeName(info.param.dtype));
});

#ifdef SPMD_WITH_CUDA
// One case as a one-step Program on the GPU (the executor copies inputs in and outputs out).
std::vector<Array> runOnGpu(const KernelCase& c) {
  Program p = oneStepProgram(c, "CudaTest");
  Executor gpu(p, std::make_shared<CudaDevice>(0));
  gpu.run(c.inputs);  // first run: algorithm search, NVRTC
  return gpu.run(c.inputs);
}

// A convolution kernel case's tensors as the forward convolution names them, and its role.
std::pair<cuda::ConvShapes, cuda::ConvRole> graphShapes(const KernelCase& c) {
  const bool data = c.op == "conv2d_backward_data", filter = c.op == "conv2d_backward_filter";
  const Shape& x = data ? c.outputs[0].second : c.inputs[0].shape;
  const Shape& w = filter ? c.outputs[0].second : c.inputs[1].shape;
  const Shape& y = c.op == "conv2d" ? c.outputs[0].second : c.inputs[data ? 0 : 1].shape;
  cuda::ConvShapes shapes{};
  for (int d = 0; d < 4; ++d) shapes.x[d] = x[size_t(d)], shapes.w[d] = w[size_t(d)], shapes.y[d] = y[size_t(d)];
  const auto& stride = std::get<std::vector<int64_t>>(c.attrs.at("stride"));
  const auto& padding = std::get<std::vector<int64_t>>(c.attrs.at("padding"));
  for (int d = 0; d < 2; ++d) shapes.stride[d] = stride[size_t(d)], shapes.padding[d] = padding[size_t(d)];
  const size_t out = c.inputs.size();  // the first output's buffer index
  shapes.xLast = c.layout(data ? out : 0) == "nhwc";
  shapes.yLast = c.layout(c.op == "conv2d" ? out : data ? 0 : 1) == "nhwc";
  return {shapes, data ? cuda::ConvRole::BackwardData : filter ? cuda::ConvRole::BackwardFilter : cuda::ConvRole::Forward};
}

// Without a GPU: cuDNN's graph API takes every convolution case's tensors, convolution and
// operations (a forward bias as a fused pointwise add, a relu as a pointwise relu after the
// convolution or the bias, and both), in f32, f64 and bf16, plain and
// channels-last (NHWC strides), and finalizes the operation graph (no configuration is ranked
// without a device); so the descriptors the GPU runs are checked in CI.
TEST(CudaTest, CudnnGraphsOfEveryConvolutionCaseFinalizeWithoutAGpu) {
  int built = 0, channelsLast = 0;
  for (DType dtype : {DType::f32, DType::f64, DType::bf16})
    for (const KernelCase& given : everyKernelCase(dtype == DType::bf16 ? DType::f32 : dtype)) {
      // Dilated and grouped convolutions take cuDNN's legacy algorithms alone (cuda/Conv.cpp).
      if (!plainConvolution(given)) continue;
      SCOPED_TRACE(given.name + " " + std::string(dtypeName(dtype)));
      // The CPU's blocked cases as plain ones; channels-last ones as given.
      const bool cudaReads = std::all_of(given.layouts.begin(), given.layouts.end(),
                                         [](const std::string& l) { return l.empty() || l == "nhwc"; });
      const auto [shapes, role] = graphShapes(cudaReads ? given : plainCase(given));
      channelsLast += shapes.xLast || shapes.yLast;
      for (int epilogue = 0; epilogue < 4; ++epilogue) {  // bias, relu, both
        const bool bias = epilogue & 1, relu = epilogue & 2;
        if (epilogue && role != cuda::ConvRole::Forward) continue;
        EXPECT_NO_THROW(cuda::GraphConv(nullptr, role, dtype, shapes, bias, relu));
        ++built;
      }
    }
  EXPECT_GE(built, 80);
  EXPECT_GE(channelsLast, 12);
}

// cuDNN's graph API (SPMD_CUDNN_GRAPH=1, cuda/CudnnGraph.h) on every f32 convolution case: the
// first configuration its heuristics rank that is deterministic and strict f32, pinned, runs (the
// step says so) and gives the reference's values (f32 rtol 1e-4 / atol 1e-5); cases it has no such
// configuration for are counted, and most must have one.
TEST(CudaTest, OnAGpuCudnnGraphConfigurationsMatchTheReference) {
  if (std::string why = gpuMissing(); !why.empty()) GTEST_SKIP() << "no GPU: " << why;
  ::setenv("SPMD_CUDNN_GRAPH", "1", 1);
  struct Restore {
    ~Restore() { ::unsetenv("SPMD_CUDNN_GRAPH"); }
  } restore;
  auto device = std::make_shared<CudaDevice>(0);
  // The GPU's properties as cuDNN serializes them, for a later deviceless test of the ranking.
  try {
    std::printf("cuDNN device properties of GPU 0 (JSON): %s\n", cuda::devicePropertiesJson(device->cudnn()).c_str());
  } catch (const Error& e) {
    std::printf("cuDNN device properties of GPU 0: %s\n", e.what());
  }
  int checked = 0, without = 0;
  for (const KernelCase& given : everyKernelCase(DType::f32)) {
    if (given.op.rfind("conv2d", 0) != 0) continue;
    const KernelCase c = given.readBy(*device) ? given : plainCase(given);  // channels-last as given
    SCOPED_TRACE(c.name);
    const auto [shapes, role] = graphShapes(c);
    std::string name;
    try {
      const auto relu = c.attrs.find("relu");
      cuda::GraphConv graph(device->cudnn(), role, DType::f32, shapes, c.inputs.size() > 2,
                            relu != c.attrs.end() && std::get<bool>(relu->second));
      for (const Variant& v : graph.variants())
        if (name.empty() && v.deterministic && !v.tensorCores) name = v.name;
    } catch (const Error& e) {
      ADD_FAILURE() << "the graph did not build: " << e.what();
    }
    if (name.empty()) {
      ++without;
      continue;
    }
    PinnedKernels pin(c.op + ":" + name);
    Executor executor(oneStepProgram(c, "CudaTest"), device);
    executor.run(inputsInLayout(c));
    std::vector<Array> actual = executor.run(inputsInLayout(c));
    outputsToPlain(c, actual);
    EXPECT_EQ(executor.variantOf(0).substr(0, name.size()), name) << executor.variantOf(0);
    spmd::testing::expectClose(actual[0], runKernel(referenceKernels(), plainCase(c))[0], 1e-4, 1e-5, c.name);
    ++checked;
  }
  std::printf("cuDNN graph configurations: %d convolution cases checked, %d without a deterministic strict-f32 one\n",
              checked, without);
  EXPECT_GE(checked, 2 * without);
}

TEST(CudaTest, BadLabelIsReportedAsOnTheCpu) {
  if (std::string why = gpuMissing(); !why.empty()) GTEST_SKIP() << "no GPU: " << why;
  KernelCase c{"bad label", "softmax_cross_entropy",
               {spmd::testing::randomArray(DType::f32, {2, 3}, 5), Array::of<int32_t>({2}, std::vector<int32_t>{1, 3})},
               {{DType::f32, {2}}}, {}};
  EXPECT_NE(errorOf([&] { runOnGpu(c); }).find("label 3 at row 1 is out of range [0, 3)"), std::string::npos);
}
#endif

}  // namespace
}  // namespace spmd::runtime
