// The user's own ops (frontend/CustomOp.h, spmd.custom_call, runtime/device/CustomKernels.h):
// a registered host kernel runs as one step on every replica of cpu and sim devices, its VJP in
// the DSL gives gradients that match finite differences (under jit and pmap alike), its attributes
// reach the kernel, and misuse is an error naming the user's line or the op.
#include <gtest/gtest.h>

#include <cmath>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/device/Driver.h"
#include "runtime/program/ProgramFile.h"
#ifdef SPMD_WITH_CUDA
#include "runtime/cuda/Nvrtc.h"
#include "runtime/device/CustomKernels.h"
#endif

namespace spmd {
namespace {

using spmd::testing::errorOf;
using spmd::testing::randomArray;
using spmd::testing::valueAt;

// softsign(x) = x / (1 + |x|), f32 or f64, with its derivative 1 / (1 + |x|)^2 as the VJP; and
// "test.affine2": (a x, x + b) with a and b attributes, no VJP. Registered once per process.
void registerTestOps() {
  static const bool done = [] {
    registerCustomOp({.name = "test.softsign",
                      .shape = [](const std::vector<TensorType>& in, const CustomAttributes&) {
                        if (in.size() != 1 || in[0].dtype == DType::i32 || in[0].dtype == DType::bf16)
                          throw Error("softsign takes one f32 or f64 tensor");
                        return std::vector{in[0]};
                      },
                      .cpu = [](const CustomKernelArgs& a) {
                        const CustomTensorView &x = a.inputs[0], &y = a.outputs[0];
                        for (int64_t i = 0; i < y.numel(); ++i) {
                          if (x.dtype == DType::f64) y.as<double>()[i] = x.as<double>()[i] / (1 + std::abs(x.as<double>()[i]));
                          else y.as<float>()[i] = x.as<float>()[i] / (1 + std::abs(x.as<float>()[i]));
                        }
                      },
                      .vjp = [](const std::vector<Tensor>& in, const std::vector<Tensor>&, const std::vector<Tensor>& g,
                                const CustomAttributes&) {
                        Tensor d = abs(in[0]) + 1.0;
                        return std::vector{g[0] / (d * d)};
                      }});
    registerCustomOp({.name = "test.affine2",
                      .shape = [](const std::vector<TensorType>& in, const CustomAttributes& attrs) {
                        if (!attrs.count("a") || !attrs.count("b")) throw Error("affine2 needs attributes a and b");
                        return std::vector{in[0], in[0]};
                      },
                      .cpu = [](const CustomKernelArgs& a) {
                        const double s = std::stod(a.attributes.at("a")), t = std::stod(a.attributes.at("b"));
                        for (int64_t i = 0; i < a.inputs[0].numel(); ++i) {
                          a.outputs[0].as<float>()[i] = float(s * a.inputs[0].as<float>()[i]);
                          a.outputs[1].as<float>()[i] = float(a.inputs[0].as<float>()[i] + t);
                        }
                      }});
    return true;
  }();
  (void)done;
}

Tensor softsign(const Tensor& x) { return customCall("test.softsign", {x})[0]; }

// The kernel's values, the attributes through the call's config, and the op in the IR and the
// Program by name.
TEST(CustomOpTest, TheRegisteredKernelRunsWithItsAttributes) {
  registerTestOps();
  auto f = jit([](const Tensor& x) {
    auto both = customCall("test.affine2", {x}, {{"a", "2.5"}, {"b", "-1"}});
    return std::tuple{softsign(x), both[0], both[1]};
  });
  Array x = randomArray(DType::f32, {3, 4}, 1);
  auto [y, scaled, shifted] = f(Tensor(x));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.values<float>()[i];
    EXPECT_EQ(y.array().values<float>()[i], v / (1 + std::abs(v))) << i;
    EXPECT_EQ(scaled.array().values<float>()[i], float(2.5 * v)) << i;
    EXPECT_EQ(shifted.array().values<float>()[i], v - 1.0f) << i;
  }
  EXPECT_NE(f.lastTracedIr().find("spmd.custom_call \"test.softsign\""), std::string::npos) << f.lastTracedIr();
  EXPECT_NE(f.lastTracedIr().find("spmd.custom_call \"test.affine2\"(%arg0) {config = \"a=2.5;b=-1\"}"), std::string::npos)
      << f.lastTracedIr();
  EXPECT_NE(f.lastProgramText().find("custom_call (%0) -> (%1, %2) {config = \"a=2.5;b=-1\", target = \"test.affine2\"}"),
            std::string::npos)
      << f.lastProgramText();
}

// f64: the VJP against central finite differences of the kernel's values; under pmap on cpu:2
// and sim:2 (the pmean of the gradients inserted as for any op) the step equals jit on the whole
// batch (1e-12).
TEST(CustomOpTest, GradientsMatchFiniteDifferencesAndPmapMatchesJit) {
  registerTestOps();
  auto lossOf = [](const Tensor& w, const Tensor& x) { return mean(softsign(matmul(x, w)), {0, 1}); };
  auto gradOf = jit([&](const Tensor& w, const Tensor& x) { return value_and_grad([&](const Tensor& v) { return lossOf(v, x); })(w); });
  Array w = randomArray(DType::f64, {3, 2}, 2), x = randomArray(DType::f64, {8, 3}, 3);
  auto [loss, g] = gradOf(Tensor(w), Tensor(x));
  auto valueOf = jit([&](const Tensor& v, const Tensor& xs) { return lossOf(v, xs); });
  const double h = 1e-6;
  for (int64_t i = 0; i < w.numel(); ++i) {
    std::vector<double> at(w.values<double>().begin(), w.values<double>().end()), above = at, below = at;
    above[size_t(i)] += h, below[size_t(i)] -= h;
    const Array up = Array::of<double>(w.shape, above), down = Array::of<double>(w.shape, below);
    const double fd = (valueAt(valueOf(Tensor(up), Tensor(x)).array(), 0) - valueAt(valueOf(Tensor(down), Tensor(x)).array(), 0)) / (2 * h);
    EXPECT_NEAR(valueAt(g.array(), i), fd, 1e-8) << i;
  }
  for (const char* devices : {"cpu:2", "sim:2"}) {
    SCOPED_TRACE(devices);
    auto step = pmap([&](const Tensor& v, const Tensor& xs) { return value_and_grad([&](const Tensor& p) { return lossOf(p, xs); })(v); },
                     {.inAxes = {replicated, split}, .devices = devices});
    auto [pl, pg] = step(Tensor(w), Tensor(x));
    EXPECT_NEAR(valueAt(pl.array(), 0), valueAt(loss.array(), 0), 1e-12);
    for (int64_t i = 0; i < w.numel(); ++i) EXPECT_NEAR(valueAt(pg.array(), i), valueAt(g.array(), i), 1e-12) << i;
  }
}

// A float kernel over every element of output 0 whose loop body is `body` (x: input 0, y: output 0).
CustomCudaKernel cudaLoop(const std::string& name, const std::string& body) {
  return {"extern \"C\" __global__ void " + name + "(spmd_custom_args a, long long n) {\n"
          "  const float* x = (const float*)a.in[0];\n  float* y = (float*)a.out[0];\n"
          "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
          "       i += (long long)blockDim.x * gridDim.x) {\n    " + body + "\n  }\n}\n",
          name};
}
constexpr const char* kSoftsignBody = "y[i] = x[i] / (1.0f + fabsf(x[i]));";

// A CUDA kernel (runtime/base/CustomKernel.h): on sim, built for the host and run in two orders,
// it gives the host kernel's bits (the same formula), gradients included (its VJP in the DSL);
// NVRTC compiles it for a GPU; a racy kernel and one that leaves elements unwritten are caught by
// name.
TEST(CustomOpTest, ACudaKernelRunsOnTheSimulatorAndRacesAreCaught) {
  registerTestOps();
  static const bool registered = [] {
    auto same = [](const std::vector<TensorType>& in, const CustomAttributes&) { return std::vector{in[0]}; };
    auto cpuSoftsign = [](const CustomKernelArgs& a) {
      for (int64_t i = 0; i < a.outputs[0].numel(); ++i)
        a.outputs[0].as<float>()[i] = a.inputs[0].as<float>()[i] / (1.0f + std::fabs(a.inputs[0].as<float>()[i]));
    };
    registerCustomOp({.name = "test.softsign_cuda", .shape = same, .cpu = cpuSoftsign,
                      .cuda = cudaLoop("test_softsign", kSoftsignBody),
                      .vjp = [](const std::vector<Tensor>& in, const std::vector<Tensor>&, const std::vector<Tensor>& g,
                                const CustomAttributes&) {
                        Tensor d = abs(in[0]) + 1.0;
                        return std::vector{g[0] / (d * d)};
                      }});
    registerCustomOp({.name = "test.racy", .shape = same, .cpu = cpuSoftsign,
                      .cuda = cudaLoop("test_racy", "y[i / 2] = x[i];")});
    registerCustomOp({.name = "test.half_written", .shape = same, .cpu = cpuSoftsign,
                      .cuda = cudaLoop("test_half", "if (i % 2 == 0) y[i] = x[i];")});
    return true;
  }();
  (void)registered;
  auto stepOn = [](const char* devices) {
    return pmap([](const Tensor& w, const Tensor& x) {
      return value_and_grad([&](const Tensor& p) { return mean(customCall("test.softsign_cuda", {matmul(x, p)})[0], {0, 1}); })(w);
    }, {.inAxes = {replicated, split}, .devices = devices});
  };
  Array w = randomArray(DType::f32, {3, 2}, 7), x = randomArray(DType::f32, {8, 3}, 8);
  auto [simLoss, simGrad] = stepOn("sim:2")(Tensor(w), Tensor(x));
  auto [cpuLoss, cpuGrad] = stepOn("cpu:2")(Tensor(w), Tensor(x));
  EXPECT_NEAR(valueAt(simLoss.array(), 0), valueAt(cpuLoss.array(), 0), 1e-6);
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_NEAR(valueAt(simGrad.array(), i), valueAt(cpuGrad.array(), i), 1e-6) << i;
  auto alone = [](const char* name) {
    return pmap([name](const Tensor& v) { return customCall(name, {v})[0]; },
                {.inAxes = {split}, .outAxes = {split}, .devices = "sim:1"});
  };
  Array v = randomArray(DType::f32, {600}, 9);
  Array viaCuda = alone("test.softsign_cuda")(Tensor(v)).array();
  for (int64_t i = 0; i < v.numel(); ++i)
    EXPECT_EQ(viaCuda.values<float>()[i], v.values<float>()[i] / (1.0f + std::fabs(v.values<float>()[i]))) << i;
  const std::string race = errorOf([&] { alone("test.racy")(Tensor(v)); });
  EXPECT_NE(race.find("custom op 'test.racy': its CUDA kernel gave element 0 of output 0 different values when its "
                      "threads ran in another order: a race"),
            std::string::npos)
      << race;
  const std::string unwritten = errorOf([&] { alone("test.half_written")(Tensor(v)); });
  EXPECT_NE(unwritten.find("custom op 'test.half_written': its CUDA kernel left element 1 of output 0 unwritten"),
            std::string::npos)
      << unwritten;
#ifdef SPMD_WITH_CUDA
  const std::string ptx = runtime::cuda::compileCuda(runtime::customCudaSource(cudaLoop("test_softsign", kSoftsignBody)), "compute_90");
  EXPECT_NE(ptx.find(".entry test_softsign"), std::string::npos) << ptx;
#endif
}

// "test.rowscale": y[r] = alpha * (x[r, 0] + ... + x[r, c-1]) + beta for f32 x[rows, c], one
// thread a row: its CUDA kernel reads the input's shape and two numeric attributes; the host
// kernel sums in the same order.
CustomCudaKernel rowScaleCuda() {
  return {"extern \"C\" __global__ void test_rowscale(spmd_custom_args a, long long n) {\n"
          "  const float* x = (const float*)a.in[0];\n  float* y = (float*)a.out[0];\n"
          "  const long long cols = a.in_shape[0][1];\n"
          "  const float alpha = (float)a.attr[spmd_attr_alpha], beta = (float)a.attr[spmd_attr_beta];\n"
          "  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < n;\n"
          "       r += (long long)blockDim.x * gridDim.x) {\n"
          "    float s = 0;\n    for (long long c = 0; c < cols; ++c) s += x[r * cols + c];\n"
          "    y[r] = alpha * s + beta;\n  }\n}\n",
          "test_rowscale", {"alpha", "beta"}};
}

void registerRowScale() {
  static const bool done = [] {
    registerCustomOp(
        {.name = "test.rowscale",
         .shape = [](const std::vector<TensorType>& in, const CustomAttributes&) {
           if (in.size() != 1 || in[0].shape.size() != 2) throw Error("rowscale takes one matrix");
           return std::vector{TensorType{in[0].dtype, {in[0].shape[0]}}};
         },
         .cpu = [](const CustomKernelArgs& a) {
           const float alpha = float(std::stod(a.attributes.at("alpha"))), beta = float(std::stod(a.attributes.at("beta")));
           const int64_t cols = a.inputs[0].shape[1];
           for (int64_t r = 0; r < a.outputs[0].numel(); ++r) {
             float s = 0;
             for (int64_t c = 0; c < cols; ++c) s += a.inputs[0].as<float>()[r * cols + c];
             a.outputs[0].as<float>()[r] = alpha * s + beta;
           }
         },
         .cuda = rowScaleCuda()});
    return true;
  }();
  (void)done;
}

Array rowScaleOn(const char* devices, const Array& x, const CustomAttributes& attributes) {
  return jit([&](const Tensor& v) { return customCall("test.rowscale", {v}, attributes)[0]; }, {.devices = devices})(Tensor(x))
      .array();
}

// A CUDA kernel reads its input's shape (a.in_shape) and its numeric attributes
// (a.attr[spmd_attr_<name>]): on sim it gives the host kernel's bits; a call missing an attribute
// the CUDA kernel reads, or giving it as text, is refused at the call's line; bad registrations
// are refused naming the attribute.
TEST(CustomOpTest, ACudaKernelReadsShapesAndAttributes) {
  registerRowScale();
  Array x = randomArray(DType::f32, {300, 7}, 11);
  const CustomAttributes attributes = {{"alpha", "-0.75"}, {"beta", "2.5e-1"}};
  Array onSim = rowScaleOn("sim:1", x, attributes), onCpu = rowScaleOn("cpu:1", x, attributes);
  ASSERT_EQ(onSim.shape, (Shape{300}));
  for (int64_t r = 0; r < 300; ++r) {
    float s = 0;
    for (int64_t c = 0; c < 7; ++c) s += x.values<float>()[r * 7 + c];
    EXPECT_EQ(onCpu.values<float>()[r], -0.75f * s + 0.25f) << r;
    EXPECT_EQ(onSim.values<float>()[r], onCpu.values<float>()[r]) << r;
  }
  const std::string missing = errorOf([&] { rowScaleOn("sim:1", x, {{"alpha", "1"}}); });
  EXPECT_NE(missing.find("CustomOpTest.cpp:"), std::string::npos) << missing;
  EXPECT_NE(missing.find("its CUDA kernel reads attribute 'beta', which the call does not give"), std::string::npos) << missing;
  const std::string text = errorOf([&] { rowScaleOn("sim:1", x, {{"alpha", "1"}, {"beta", "fast"}}); });
  EXPECT_NE(text.find("reads attribute 'beta' as a number, but the call gives 'fast'"), std::string::npos) << text;
  const auto same = [](const std::vector<TensorType>& in, const CustomAttributes&) { return in; };
  const auto none = [](const CustomKernelArgs&) {};
  EXPECT_NE(errorOf([&] {
              registerCustomOp({.name = "test.twice", .shape = same, .cpu = none, .cuda = {"x", "f", {"a", "a"}}});
            }).find("its CUDA kernel names attribute 'a' twice"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              registerCustomOp({.name = "test.badattr", .shape = same, .cpu = none, .cuda = {"x", "f", {"a-b"}}});
            }).find("its CUDA kernel's attribute 'a-b' is not a name"),
            std::string::npos);
#ifdef SPMD_WITH_CUDA
  const std::string ptx = runtime::cuda::compileCuda(runtime::customCudaSource(rowScaleCuda()), "compute_90");
  EXPECT_NE(ptx.find(".entry test_rowscale"), std::string::npos) << ptx;
#endif
}

// On a GPU (skipped without one; the GPU report runs it): the CUDA kernel compiled by NVRTC gives
// the host formula's values (IEEE division and fabsf: the same bits), and its gradients under
// jit match the host kernel's on cpu.
TEST(CustomOpTest, ACudaKernelRunsOnAGpu) {
  std::string why;
  if (runtime::availableDevices("cuda", &why) == 0) GTEST_SKIP() << "no GPU: " << why;
  registerTestOps();
  if (!customOpRegistered("test.softsign_cuda"))
    registerCustomOp({.name = "test.softsign_cuda",
                      .shape = [](const std::vector<TensorType>& in, const CustomAttributes&) { return std::vector{in[0]}; },
                      .cpu = [](const CustomKernelArgs&) { throw Error("the host kernel must not run on cuda"); },
                      .cuda = cudaLoop("test_softsign", kSoftsignBody)});
  Array v = randomArray(DType::f32, {3000}, 10);
  auto f = jit([](const Tensor& x) { return customCall("test.softsign_cuda", {x})[0]; }, {.devices = "cuda:0"});
  Array y = f(Tensor(v)).array();
  for (int64_t i = 0; i < v.numel(); ++i)
    EXPECT_EQ(y.values<float>()[i], v.values<float>()[i] / (1.0f + std::fabs(v.values<float>()[i]))) << i;
  // Shapes and attributes reach the kernel (NVRTC may fuse alpha * s + beta: within 1e-5).
  registerRowScale();
  Array x = randomArray(DType::f32, {3000, 5}, 12);
  const CustomAttributes attributes = {{"alpha", "1.5"}, {"beta", "-2"}};
  Array onGpu = rowScaleOn("cuda:0", x, attributes), onCpu = rowScaleOn("cpu:1", x, attributes);
  for (int64_t r = 0; r < 3000; ++r) EXPECT_NEAR(onGpu.values<float>()[r], onCpu.values<float>()[r], 1e-5) << r;
}

// Misuse: a bad or taken name, a missing shape rule, an unknown op, inputs the shape rule refuses,
// a gradient through an op without a VJP, and a Program loaded where its op is not registered.
TEST(CustomOpTest, MisuseIsAClearError) {
  registerTestOps();
  const auto noKernel = [](const CustomKernelArgs&) {};
  const auto same = [](const std::vector<TensorType>& in, const CustomAttributes&) { return in; };
  EXPECT_NE(errorOf([&] { registerCustomOp({.name = "bad name", .shape = same, .cpu = noKernel}); })
                .find("a custom op's name is letters, digits"),
            std::string::npos);
  const std::string taken = errorOf([&] { registerCustomOp({.name = "test.softsign", .shape = same, .cpu = noKernel}); });
  EXPECT_NE(taken.find("CustomOpTest.cpp:"), std::string::npos) << taken;
  EXPECT_NE(taken.find("'test.softsign': it is registered already"), std::string::npos) << taken;
  EXPECT_NE(errorOf([&] { registerCustomOp({.name = "test.noshape", .shape = {}, .cpu = noKernel}); }).find("it has no shape rule"),
            std::string::npos);
  Array x = randomArray(DType::f32, {4}, 4);
  const std::string unknown = errorOf([&] { jit([](const Tensor& v) { return customCall("test.nothing", {v})[0]; })(Tensor(x)); });
  EXPECT_NE(unknown.find("spmd::customCall 'test.nothing': no custom op of that name is registered (registered: "),
            std::string::npos) << unknown;
  EXPECT_NE(unknown.find("test.softsign"), std::string::npos) << unknown;
  const std::string refused = errorOf([&] {
    jit([](const Tensor& v) { return customCall("test.affine2", {v}, {{"a", "1"}})[0]; })(Tensor(x));
  });
  EXPECT_NE(refused.find("CustomOpTest.cpp:"), std::string::npos) << refused;
  EXPECT_NE(refused.find("its shape rule refused the inputs: affine2 needs attributes a and b"), std::string::npos) << refused;
  const std::string noVjp = errorOf([&] {
    jit([](const Tensor& v) {
      return grad([](const Tensor& p) { return sum(customCall("test.affine2", {p}, {{"a", "2"}, {"b", "0"}})[0], {0}); })(v);
    })(Tensor(x));
  });
  EXPECT_NE(noVjp.find("custom op 'test.affine2' has no VJP, so gradients cannot flow through it"), std::string::npos)
      << noVjp;
  EXPECT_EQ(noVjp.find("see current operation"), std::string::npos) << "no generic-form op in a user's error: " << noVjp;
  // A host kernel that throws something other than a std::exception (an int) stops the step with
  // a message, on cpu and on sim, whose replica thread it ended (std::terminate) before.
  registerCustomOp({.name = "test.throws_int", .shape = same, .cpu = [](const CustomKernelArgs&) { throw 42; }});
  for (const char* devices : {"cpu", "sim"}) {
    const std::string thrown = errorOf([&] {
      jit([](const Tensor& v) { return customCall("test.throws_int", {v})[0]; }, {.devices = devices})(Tensor(x));
    });
    EXPECT_NE(thrown.find("CustomOpTest.cpp:"), std::string::npos) << thrown;
    EXPECT_NE(thrown.find("custom op 'test.throws_int': its host kernel threw something that is not a std::exception"),
              std::string::npos)
        << thrown;
  }

#ifdef SPMD_RUN_PATH  // not in the sanitizers' subsets
  // The Program saved, its target renamed: loading it for a run is refused naming the op.
  auto plain = jit([](const Tensor& v) { return softsign(v); });
  plain(Tensor(x));
  runtime::Program program = plain.lastProgram();
  for (runtime::Step& step : program.steps)
    if (step.op == "custom_call") step.attrs["target"] = std::string("test.elsewhere");
  const testing::ScratchDir dir("spmd-custom-op");
  const std::string path = dir / "custom_op.spmd";
  runtime::saveProgram(program, path);
  auto run = testing::runCommand(testing::spmdRunPath() + " " + path + " --devices cpu:1 --steps 1");
  EXPECT_EQ(run.status, 1) << run.output;
  EXPECT_NE(run.output.find("runs custom op 'test.elsewhere', which is not registered in this process (registered: none)"),
            std::string::npos)
      << run.output;
#endif
}

}  // namespace
}  // namespace spmd
