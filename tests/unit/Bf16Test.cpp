// bf16: the rounding (runtime/base/BFloat16.h) against an oracle written from the definition;
// convert on the reference, CPU and simulator backends; every op of the kernel cases compiled in
// bf16 through the pipeline (passes/WidenBf16.cpp) on the CPU and the simulator (and cuda:0 for
// both, where a GPU is visible: the GPU report runs this file) against the
// reference kernels in f32 on the bf16 inputs, rounded to bf16; and mixed-precision training
// (nn::ApplyOptions::compute) on N devices against 1 device; convolutions and matmuls kept in
// bf16 for a backend's bf16 kernels against the same ops widened. The parity with torch.autocast is
// in TorchReferenceTest (the seeds' CNNs).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>

#include "KernelCases.h"
#include "TestUtil.h"
#include "TreeCompare.h"
#include "compiler/Pipeline.h"
#include "compiler/Registration.h"
#include "frontend/io/Safetensors.h"
#include "frontend/io/TreeCheckpoint.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/CpuVariants.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/exec/Executor.h"
#include "runtime/program/Bf16Kernels.h"
#include "runtime/program/ProgramFile.h"

namespace spmd {
namespace {

using namespace runtime;

// The backends a bf16 test runs on: the CPU, the simulator and, where a GPU is visible, cuda:0.
std::vector<std::pair<std::string, std::shared_ptr<Device>>> bf16Backends() {
  std::vector<std::pair<std::string, std::shared_ptr<Device>>> backends = {
      {"cpu", std::make_shared<CpuDevice>()}, {"sim", makeDevice(parseDeviceList("sim"), 0)}};
  if (availableDevices("cuda") > 0) backends.emplace_back("cuda", makeDevice(parseDeviceList("cuda:0"), 0));
  return backends;
}

// The nearest bf16 to v by the definition: the two bf16 values around v (truncation, and one
// step further from zero), the nearer one in exact (double) arithmetic, on a tie the one with an
// even last bit; NaN stays NaN. Past the largest bf16 the next step is 2^128, as if the exponent
// went on (IEEE's rule): a value nearer to it than to the largest bf16 overflows to infinity.
float nearestBf16(float v) {
  if (std::isnan(v)) return v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  uint32_t down = u & 0xffff0000u, up = down + 0x10000u;
  float lo, hi;
  std::memcpy(&lo, &down, 4);
  std::memcpy(&hi, &up, 4);
  if (lo == v) return v;
  double next = std::isinf(hi) ? std::copysign(std::ldexp(1.0, 128), double(v)) : double(hi);
  double toLo = std::fabs(double(v) - double(lo)), toHi = std::fabs(next - double(v));
  if (toLo != toHi) return toLo < toHi ? lo : hi;
  return (down >> 16) & 1 ? hi : lo;
}

uint32_t bitsOf(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  return u;
}

std::vector<float> roundingCases() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 1.0f + 0x1p-8f /* tie: to 1 */, 1.0f + 0x3p-8f /* tie: up */,
                               0x1.fep-1f, std::numeric_limits<float>::max() /* past the largest bf16: inf */,
                               0x1.fefffep127f /* just below the tie: the largest bf16 */,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::denorm_min(), 0x1.008p-130f /* subnormal tie */,
                               std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::signaling_NaN(), 3.14159265f, -2.71828183f, 1e-40f};
  std::mt19937 rng(7);
  for (int i = 0; i < (1 << 18); ++i) {  // any bit pattern, and the ties (low half exactly 0x8000)
    uint32_t u = rng();
    if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;
    float v;
    std::memcpy(&v, &u, 4);
    values.push_back(v);
  }
  return values;
}

TEST(Bf16Test, RoundsToNearestEvenAsTheDefinitionSays) {
  int64_t checked = 0;
  for (float v : roundingCases()) {
    float got = fromBf16(toBf16(v)), want = nearestBf16(v);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "NaN must stay NaN: bits " << std::hex << bitsOf(v);
      EXPECT_EQ(std::signbit(got), std::signbit(v)) << "NaN keeps its sign: bits " << std::hex << bitsOf(v);
      continue;
    }
    ASSERT_EQ(bitsOf(got), bitsOf(want)) << "v = " << v << " (bits " << std::hex << bitsOf(v) << ")";
    ++checked;
  }
  EXPECT_GT(checked, 200000);
  // Every bf16 is an f32 that rounds to itself.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float v = fromBf16(bf16{uint16_t(b)});
    if (!std::isnan(v)) { ASSERT_EQ(toBf16(v).bits, b); }
  }
}

Array bf16Array(std::span<const float> values) {
  Array a = Array::zeros(DType::bf16, {int64_t(values.size())});
  for (size_t i = 0; i < values.size(); ++i) a.values<bf16>()[i] = toBf16(values[i]);
  return a;
}

// convert to and from bf16 on the reference kernels, the CPU backend and the simulator: to bf16
// rounds as toBf16 (f64 through f32, i32 too), from bf16 is exact, to i32 truncates and saturates.
TEST(Bf16Test, ConvertRoundsTheSameOnEveryBackend) {
  // Every rounding case (262k values: the CPU's vectorized loop runs them in 9 chunks, the last
  // one partial), every bf16 widened (2 whole chunks).
  std::vector<float> floats = roundingCases();
  std::vector<double> doubles = {0.1, -1e300, 1e-300, 3.0000000000000004, 1.00390625000001, 65535.5};
  std::vector<int32_t> ints = {0, 1, -1, 257, 259, -65793, 16777217, std::numeric_limits<int32_t>::max()};
  std::vector<float> toInt = {1.5f, -1.5f, 3e9f, -3e9f, std::numeric_limits<float>::quiet_NaN(), 255.9f, -0.5f};
  std::vector<float> everyBf16;
  for (uint32_t b = 0; b < 0x10000; ++b) everyBf16.push_back(fromBf16(bf16{uint16_t(b)}));
  std::vector<KernelCase> cases = {
      {"f32 to bf16", "convert", {Array::of<float>({int64_t(floats.size())}, floats)}, {{DType::bf16, {int64_t(floats.size())}}}},
      {"f64 to bf16", "convert", {Array::of<double>({int64_t(doubles.size())}, doubles)}, {{DType::bf16, {int64_t(doubles.size())}}}},
      {"i32 to bf16", "convert", {Array::of<int32_t>({int64_t(ints.size())}, ints)}, {{DType::bf16, {int64_t(ints.size())}}}},
      {"bf16 to f32", "convert", {bf16Array(everyBf16)}, {{DType::f32, {0x10000}}}},
      {"bf16 to f64", "convert", {bf16Array(everyBf16)}, {{DType::f64, {0x10000}}}},
      {"bf16 to i32", "convert", {bf16Array(toInt)}, {{DType::i32, {int64_t(toInt.size())}}}},
  };
  // What each case must give, element by element, from the definitions.
  auto expected = [&](const KernelCase& c, int64_t i) -> double {
    const Array& in = c.inputs[0];
    double v = in.dtype == DType::f32 ? in.values<float>()[i] : in.dtype == DType::f64 ? in.values<double>()[i]
               : in.dtype == DType::i32 ? double(in.values<int32_t>()[i]) : double(fromBf16(in.values<bf16>()[i]));
    switch (c.outputs[0].first) {
      case DType::bf16: return nearestBf16(float(v));
      case DType::i32: return std::isnan(v) ? 0 : std::trunc(std::clamp(v, -2147483648.0, 2147483647.0));
      default: return v;
    }
  };
  const auto backends = bf16Backends();
  for (const KernelCase& c : cases) {
    std::vector<std::pair<std::string, Array>> results = {{"reference", runKernel(referenceKernels(), c)[0]}};
    for (auto& [name, device] : backends)
      results.emplace_back(name, Executor(oneStepProgram(c, "Bf16Test"), device).run(c.inputs)[0]);
    for (const auto& [backend, got] : results)
      for (int64_t i = 0; i < got.numel(); ++i) {
        double want = expected(c, i), have = testing::valueAt(got, i);
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(have)) << c.name << " on " << backend << " at " << i;
          continue;
        }
        ASSERT_EQ(have, want) << c.name << " on " << backend << " at " << i;
      }
  }
}

// A fused body of a bf16 step (passes/FuseElementwise.cpp fuses spmd-widen-bf16's converts):
// a bf16 input is read widened, round_bf16 and a bf16 output round as convert does, and the f32
// arithmetic between them is the unfused op's, on the reference kernels, the CPU backend (its
// vector loops, over many chunks and both threads) and the simulator (the generated CUDA source).
TEST(Bf16Test, FusedBodiesRoundAndWidenAsTheConvertsDo) {
  std::vector<float> floats = roundingCases();
  const int64_t n = int64_t(floats.size());
  std::vector<float> widened(floats.size());  // every bf16 value, over and over
  for (size_t i = 0; i < widened.size(); ++i) widened[i] = fromBf16(bf16{uint16_t(i * 7919)});
  const KernelCase c{"fused roundings", "fused", {bf16Array(widened), Array::of<float>({n}, floats)},
                     {{DType::bf16, {n}}, {DType::bf16, {n}}, {DType::f32, {n}}},
                     {{"body", std::string("%0 = load 0; %1 = load 1; %2 = round_bf16 %1; %3 = add %0 %2; "
                                           "%4 = round_bf16 %3; yield %2 %4 %3")}}};
  std::vector<std::pair<std::string, std::vector<Array>>> results = {{"reference", runKernel(referenceKernels(), c)}};
  for (auto& [name, device] : bf16Backends())
    results.emplace_back(name, Executor(oneStepProgram(c, "Bf16Test"), device).run(c.inputs));
  auto same = [](float have, float want) {
    return std::isnan(want) ? std::isnan(have) : bitsOf(have) == bitsOf(want);
  };
  for (const auto& [backend, got] : results) {
    ASSERT_EQ(got.size(), 3u);
    for (int64_t i = 0; i < n; ++i) {
      const float rounded = nearestBf16(floats[size_t(i)]), sum = widened[size_t(i)] + rounded;
      const float have0 = fromBf16(got[0].values<bf16>()[i]), have1 = fromBf16(got[1].values<bf16>()[i]);
      ASSERT_TRUE(same(have0, rounded)) << backend << " at " << i << ": round_bf16 of " << floats[size_t(i)];
      ASSERT_TRUE(same(got[2].values<float>()[i], sum)) << backend << " at " << i << ": the f32 sum";
      ASSERT_TRUE(same(have1, nearestBf16(sum))) << backend << " at " << i << ": the sum rounded as it is stored";
    }
  }
}

// The kernel case as the body of a function on bf16 tensors (floats in bf16, i32 as it is), in
// MLIR's generic form, for the compiler.
std::string irOf(const KernelCase& c) {
  auto typeOf = [](DType t, const Shape& shape) {
    std::string s = "tensor<";
    for (int64_t d : shape) s += std::to_string(d) + "x";
    return s + (t == DType::i32 ? "i32" : "bf16") + ">";
  };
  std::vector<std::string> ins, outs;
  for (const Array& a : c.inputs) ins.push_back(typeOf(a.dtype, a.shape));
  for (const auto& [t, shape] : c.outputs) outs.push_back(typeOf(t, shape));
  auto join = [](const std::vector<std::string>& v, const std::string& prefix = "") {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + prefix + v[i];
    return s;
  };
  std::vector<std::string> attrs;
  for (const auto& [name, value] : c.attrs) {
    std::string text;
    if (auto* b = std::get_if<bool>(&value)) text = *b ? "true" : "false";
    else if (auto* i = std::get_if<int64_t>(&value)) text = std::to_string(*i) + " : i64";
    else if (auto* d = std::get_if<double>(&value)) {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%.17e : f64", *d);
      text = buffer;
    } else if (auto* v = std::get_if<std::vector<int64_t>>(&value)) {
      text = "array<i64";
      for (size_t k = 0; k < v->size(); ++k) text += (k ? ", " : ": ") + std::to_string((*v)[k]);
      text += ">";
    } else if (auto* s = std::get_if<std::string>(&value)) {
      text = name == "reduction" ? "#spmd.reduction<" + *s + ">" : "\"" + *s + "\"";
    }
    attrs.push_back(name + " = " + text);
  }
  // Ops whose last operand is optional: how many come before it.
  const std::map<std::string, size_t> required = {{"conv2d", 2}, {"matmul", 2}, {"batch_norm_train", 3},
                                                  {"batch_norm_train_backward", 5}, {"reduce_window_backward", 1}};
  if (auto it = required.find(c.op); it != required.end()) {
    std::string sizes = "operandSegmentSizes = array<i32";
    for (size_t k = 0; k <= it->second; ++k) sizes += std::string(k ? ", " : ": ") + (k < c.inputs.size() ? "1" : "0");
    attrs.push_back(sizes + ">");
  }
  std::vector<std::string> args, results;
  for (size_t i = 0; i < ins.size(); ++i) args.push_back("%a" + std::to_string(i));
  for (size_t i = 0; i < outs.size(); ++i) results.push_back("%r#" + std::to_string(i));
  std::vector<std::string> params;
  for (size_t i = 0; i < ins.size(); ++i) params.push_back(args[i] + ": " + ins[i]);
  return "func.func @main(" + join(params) + ") -> (" + join(outs) + ") {\n  %r:" + std::to_string(outs.size()) +
         " = \"spmd." + c.op + "\"(" + join(args) + ")" + (attrs.empty() ? "" : " <{" + join(attrs) + "}>") + " : (" + join(ins) + ") -> (" +
         join(outs) + ")\n  return " + join(results) + " : " + join(outs) + "\n}\n";
}

Array rounded(const Array& a) {  // f32 values rounded to bf16, as bf16
  Array out = Array::zeros(DType::bf16, a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.values<bf16>()[i] = toBf16(a.values<float>()[i]);
  return out;
}

Array widened(const Array& a) {  // bf16 values as f32 (exact)
  Array out = Array::zeros(DType::f32, a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) out.values<float>()[i] = fromBf16(a.values<bf16>()[i]);
  return out;
}

// Every op of the f32 kernel cases (but the fused bodies, which the compiler makes, and the
// blocked layouts, which it gives f32 alone), on bf16 tensors through the whole pipeline on the
// CPU backend and the simulator: each output is the reference kernel's f32 result on the bf16
// inputs, rounded to bf16, to the bit where the backends' f32 arithmetic agrees with the
// reference's, else one bf16 step (2^-7 relative) away, where an f32 result that differs in
// its last bits lies on the other side of a bf16 rounding boundary.
TEST(Bf16Test, EveryOpComputesInF32BetweenBf16Roundings) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  const auto backends = bf16Backends();
  std::set<std::string> ops;
  int64_t elements = 0, exact = 0;
  for (const KernelCase& f32Case : kernelCases(DType::f32)) {
    // A custom op's kernel takes the dtypes its author wrote it for (here f32 and f64).
    if (!f32Case.layouts.empty() || f32Case.op == "fused" || f32Case.op == "custom_call") continue;
    KernelCase c = f32Case, reference = f32Case;  // c: on bf16; reference: f32 on the same values
    for (size_t i = 0; i < c.inputs.size(); ++i)
      if (c.inputs[i].dtype != DType::i32) {
        c.inputs[i] = rounded(c.inputs[i]);
        reference.inputs[i] = widened(c.inputs[i]);
      }
    for (size_t i = 0; i < c.outputs.size(); ++i)
      if (c.outputs[i].first != DType::i32) c.outputs[i].first = DType::bf16, reference.outputs[i].first = DType::f32;
    std::vector<Array> want = runKernel(referenceKernels(), reference);
    std::string ir = irOf(c);
    mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(ir, &context);
    ASSERT_TRUE(module) << c.name << ": the IR does not parse:\n" << ir;
    Program program = compile(*module, {.fuseElementwise = false});
    for (const Step& step : program.steps)
      for (int id : step.inputs)
        if (step.op != "convert") {
          ASSERT_NE(program.buffers[id].dtype, DType::bf16) << c.name << ": " << step.op << " reads bf16";
        }
    for (auto& [backend, device] : backends) {
      std::vector<Array> got = Executor(program, device).run(c.inputs);
      for (size_t o = 0; o < got.size(); ++o) {
        ASSERT_EQ(got[o].dtype, c.outputs[o].first);
        for (int64_t i = 0; i < got[o].numel(); ++i) {
          double have = testing::valueAt(got[o], i);
          double expect = want[o].dtype == DType::i32 ? testing::valueAt(want[o], i)
                                                      : double(nearestBf16(want[o].values<float>()[i]));
          ++elements;
          if (have == expect || (std::isnan(have) && std::isnan(expect))) {
            ++exact;
            continue;
          }
          ASSERT_LE(std::fabs(have - expect), 0x1p-7 * std::fabs(expect) + 1e-6)
              << c.name << " on " << backend << ", output " << o << " at " << i << ": " << have << " vs " << expect;
        }
      }
    }
    ops.insert(c.op);
  }
  EXPECT_GE(ops.size(), 40u) << "every op of the kernel cases";
  EXPECT_GT(double(exact), 0.97 * double(elements)) << "most elements round to the reference's bits";
  std::printf("  %zu ops, %lld elements: %.2f%% the reference's bits, the rest one bf16 step away\n", ops.size(),
              static_cast<long long>(elements), 100.0 * double(exact) / double(elements));
}

// The convolutions and matmuls kept in bf16 (the compiler's native-kernels mode, pmap's default
// where a backend has bf16 kernels: runtime/program/Bf16Kernels.h). A kernel without a library
// bf16 kernel (the reference's; the CPU's without AVX512-BF16 or AMX, which the simulator runs
// too) runs its f32 kernel between roundings (runtime/device/WidenedBf16.h): the rounded f32
// kernel's bits, and the emulated program's bits through the whole pipeline. A library kernel
// (oneDNN's bf16, cuDNN's, cuBLAS's) sums in its own order: within one bf16 step (2^-7) of them.
TEST(Bf16Test, OpsKeptInBf16GiveTheEmulatedResults) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  const bool cpuLibrary = cpu::onednnBf16();
  std::printf("  cpu: %s\n", cpu::onednnBf16Path().c_str());
  int64_t cases = 0, elements = 0, exact = 0;
  auto compare = [&](const std::vector<Array>& got, const std::vector<Array>& want, bool bits, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].dtype, DType::bf16) << what;
      for (int64_t i = 0; i < got[o].numel(); ++i) {
        const double have = testing::valueAt(got[o], i), expect = testing::valueAt(want[o], i);
        ++elements;
        if (have == expect) {
          ++exact;
          continue;
        }
        ASSERT_FALSE(bits) << what << ", output " << o << " at " << i << ": " << have << " vs " << expect;
        ASSERT_LE(std::fabs(have - expect), 0x1p-7 * std::fabs(expect) + 1e-6)
            << what << ", output " << o << " at " << i << ": " << have << " vs " << expect;
      }
    }
  };
  for (const KernelCase& f32Case : kernelCases(DType::f32)) {
    if (!hasBf16Kernel(f32Case.op)) continue;
    KernelCase c = f32Case, wide = f32Case;  // c: on bf16; wide: f32 on the same values
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      c.inputs[i] = rounded(c.inputs[i]);
      wide.inputs[i] = widened(c.inputs[i]);
    }
    for (auto& output : c.outputs) output.first = DType::bf16;
    // The kernels alone, on bf16 views (the CPU's in the blocked layouts too).
    const bool plain = c.layouts.empty();
    for (const auto& [name, table] : {std::pair{"reference", &referenceKernels()}, std::pair{"cpu", &cpuKernels()}}) {
      if (!plain && std::string(name) == "reference") continue;
      std::vector<Array> want = runKernel(*table, wide);
      for (Array& a : want) a = rounded(a);
      compare(runKernel(*table, c), want, std::string(name) == "reference" || !cpuLibrary,
              c.name + ": the " + name + " kernel on bf16");
    }
    ++cases;
    if (!plain) continue;  // through the pipeline the compiler chooses the layouts
    // Through the pipeline, against the program that widens the op itself.
    auto programOf = [&](bool native) {
      mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(irOf(c), &context);
      EXPECT_TRUE(module) << c.name;
      return compile(*module, {.fuseElementwise = false, .bf16Kernels = native});
    };
    const Program native = programOf(true), emulated = programOf(false);
    auto readsBf16 = [&](const Program& p) {
      for (const Step& step : p.steps)
        if (step.op == c.op) return p.buffers[step.inputs[0]].dtype == DType::bf16;
      return false;
    };
    ASSERT_TRUE(readsBf16(native)) << c.name << ": native-kernels did not keep the op in bf16";
    ASSERT_FALSE(readsBf16(emulated)) << c.name << ": the emulated program runs the op in bf16";
    for (auto& [backend, device] : bf16Backends())
      compare(Executor(native, device).run(c.inputs), Executor(emulated, device).run(c.inputs),
              backend != "cuda" && !cpuLibrary, c.name + " on " + backend + ", kept in bf16 vs widened");
  }
  EXPECT_GE(cases, 20) << "the convolution and matmul cases";
  std::printf("  %lld cases, %lld elements: %.2f%% the same bits\n", static_cast<long long>(cases),
              static_cast<long long>(elements), 100.0 * double(exact) / double(elements));
}

// The shape kernels move elements by their size: on bf16 ones the CPU's own gathers
// (broadcast_in_dim, transpose) give the reference's bits, as on f32 ones (they moved 2-byte
// elements as 4-byte ones once: never reached, the compiler widening every bf16 move).
TEST(Bf16Test, ShapeKernelsMoveBf16ElementsAsTheyAre) {
  int ran = 0;
  for (const KernelCase& f32Case : kernelCases(DType::f32)) {
    if (f32Case.op != "transpose" && f32Case.op != "broadcast_in_dim" && f32Case.op != "reshape") continue;
    if (f32Case.inputs[0].dtype != DType::f32 || !f32Case.layouts.empty()) continue;
    KernelCase c = f32Case;
    c.inputs[0] = rounded(c.inputs[0]);
    c.outputs[0].first = DType::bf16;
    const std::vector<Array> want = runKernel(referenceKernels(), c), got = runKernel(cpuKernels(), c);
    testing::expectSameBits(got[0], want[0], c.name + " on bf16");
    Array moved = runKernel(referenceKernels(), f32Case)[0];  // and the f32 move's values, rounded
    testing::expectSameBits(want[0], rounded(moved), c.name + ": the reference's bf16 move");
    ++ran;
  }
  EXPECT_GE(ran, 4);
}

// Where oneDNN's bf16 kernels run, the CPU's f32 variants are candidates for the steps kept in
// bf16 too (runtime/device/Variants.h's widensBf16: on an AMX Xeon, stage 4's bf16 filter
// gradient took 18.8 ms against 8.4 for Winograd between roundings): each pinned on each case it
// runs on gives the rounded result of the same variant on the widened operands, to the bit, and
// says how it ran. Elsewhere the kernels widen the whole step (the case above).
TEST(Bf16Test, OnOnednnBf16TheF32VariantsRunBetweenRoundingsToTheirBits) {
  if (!cpu::onednnBf16()) GTEST_SKIP() << "no oneDNN bf16 kernels here: " << cpu::onednnBf16Path();
  int ran = 0;
  for (const KernelCase& f32Case : kernelCases(DType::f32)) {
    if (!hasBf16Kernel(f32Case.op)) continue;
    KernelCase c = f32Case, wide = f32Case;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      c.inputs[i] = rounded(c.inputs[i]);
      wide.inputs[i] = widened(c.inputs[i]);
    }
    for (auto& output : c.outputs) output.first = DType::bf16;
    for (const KernelVariant& v : cpu::cpuVariants(c.op).variants) {
      if (std::string(v.name) == "onednn") continue;  // oneDNN's bf16 kernel itself (the case above)
      PinnedKernels pin(c.op + ":" + v.name);
      std::string wideWhich, which;
      std::vector<Array> want;
      try {
        want = runKernel(cpuKernels(), wide, &wideWhich);
      } catch (const Error&) {
        continue;  // the pinned variant does not run on this case
      }
      if (wideWhich.rfind(std::string(v.name) + ":", 0) != 0) continue;
      for (Array& a : want) a = rounded(a);
      const std::vector<Array> got = runKernel(cpuKernels(), c, &which);
      EXPECT_EQ(which.rfind(std::string(v.name) + ":", 0), 0u) << c.name << ": " << which;
      if (which.find("(in f32 between bf16 roundings)") == std::string::npos) continue;  // it takes bf16 itself (sliced oneDNN)
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < got.size(); ++o) testing::expectSameBits(got[o], want[o], c.name + " " + v.name);
      ++ran;
    }
  }
  std::printf("  %d variant runs between bf16 roundings, each the bits of the widened run\n", ran);
  EXPECT_GE(ran, 10) << "the Winograd, strided, one-channel and own-GEMM variants on their cases";
}

// Whether oneDNN should run bf16 kernels here, from the machine itself rather than from the
// implementation's probe (cpu::onednnBf16): the CPU's flags (AVX512-BF16 or AMX-BF16, as
// /proc/cpuinfo lists them) and oneDNN's ISA cap, if one is set, at or above AVX512_CORE_BF16.
bool machineHasBf16Kernels() {
  std::ifstream in("/proc/cpuinfo");
  bool flag = false;
  for (std::string line; std::getline(in, line) && !flag;)
    if (line.rfind("flags", 0) == 0)
      flag = line.find(" avx512_bf16") != std::string::npos || line.find(" amx_bf16") != std::string::npos;
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"})
    if (const char* cap = std::getenv(name); cap && *cap) {
      const std::string isa = cap;
      return flag && (isa == "ALL" || isa == "AVX512_CORE_BF16" || isa.rfind("AVX512_CORE_AMX", 0) == 0 ||
                      isa == "AVX512_CORE_FP16");
    }
  return flag;
}

// The implementation's probe agrees with the machine: a probe that always said "no bf16 kernels"
// would leave the kept-bf16 branches of cpu/Conv.cpp, ConvBackward.cpp and Dense.cpp untested
// while OpsKeptInBf16GiveTheEmulatedResults passed.
TEST(Bf16Test, TheCpuRunsOnednnBf16KernelsExactlyWhereTheMachineHasThem) {
  EXPECT_EQ(cpu::onednnBf16(), machineHasBf16Kernels()) << cpu::onednnBf16Path();
}

// SPMD_NATIVE_BF16 chooses the path, and spmd::bf16KernelPath (what the sample prints, and
// SPMD_LOG_COMPILES) says which: unset, the backend's bf16 kernels where it has them; 0, the
// emulation everywhere; 1, the kernels or, for a program with bf16 ops, an error saying why not.
TEST(Bf16Test, NativeBf16SwitchChoosesThePathAndSaysWhich) {
  struct Restore {
    ~Restore() { unsetenv("SPMD_NATIVE_BF16"); }
  } restore;
  unsetenv("SPMD_NATIVE_BF16");
  const std::string emulated = "emulated: the f32 kernels between bf16 roundings";
  EXPECT_EQ(bf16KernelPath("cpu:1"), cpu::onednnBf16Path());
  EXPECT_EQ(bf16KernelPath("cpu:1").rfind(emulated, 0) == 0, !cpu::onednnBf16()) << bf16KernelPath("cpu:1");
  EXPECT_EQ(bf16KernelPath("sim:1"), emulated) << "the simulator has no bf16 library kernels";
  setenv("SPMD_NATIVE_BF16", "0", 1);
  EXPECT_EQ(bf16KernelPath("cpu:1").rfind(emulated, 0), 0u) << bf16KernelPath("cpu:1");
  Array x = testing::randomArray(DType::f32, {4, 4}, 3, -1, 1);
  auto product = [](DType compute) {
    return jit([compute](const Tensor& a) { return cast(matmul(cast(a, compute), cast(a, compute)), DType::f32); },
               {.devices = "cpu:1"});
  };
  setenv("SPMD_NATIVE_BF16", "1", 1);
  EXPECT_NO_THROW(product(DType::f32)(x)) << "an f32 program needs no bf16 kernels";
  if (cpu::onednnBf16()) {
    EXPECT_NO_THROW(product(DType::bf16)(x));
  } else {
    try {
      product(DType::bf16)(x);
      ADD_FAILURE() << "SPMD_NATIVE_BF16=1 on a CPU without bf16 kernels compiled a bf16 program";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SPMD_NATIVE_BF16=1 asks for the cpu backend's bf16 kernels"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("AVX512-BF16"), std::string::npos) << e.what();
    }
  }
  setenv("SPMD_NATIVE_BF16", "sometimes", 1);
  EXPECT_THROW(bf16KernelPath("cpu:1"), Error) << "not a switch";
}

// bf16 in files: a safetensors checkpoint keeps the bits (dtype "BF16"), a compiled bf16 program
// saved as a Program file and read back gives the same bits as the one compiled, and spmd-run
// runs the file.
TEST(Bf16Test, FilesKeepBf16) {
  std::vector<float> values = roundingCases();
  values.resize(1000);
  io::Checkpoint checkpoint{{{"w", bf16Array(values)}}, {}};
  const testing::ScratchDir dir("spmd-bf16-files");
  const std::string path = dir / "bf16.safetensors";
  io::saveSafetensors(path, checkpoint);
  Array back = io::loadSafetensors(path).tensors.at("w");
  ASSERT_EQ(back.dtype, DType::bf16);
  EXPECT_EQ(std::memcmp(back.data(), checkpoint.tensors["w"].data(), back.bytes()), 0);
  // A tree read back against a model's bf16 tree (finite values pass, a NaN is named).
  Tree like;
  like.set("w", Array::zeros(DType::bf16, {1000}));
  io::Checkpoint finite{{{"w", bf16Array(std::vector<float>(1000, 0.5f))}}, {}};
  EXPECT_EQ(io::readTree(finite, "", like, "test", "").at("w").dtype(), DType::bf16);
  EXPECT_THROW(io::readTree(checkpoint, "", like, "test", ""), Error) << "the NaNs among the values";

  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  KernelCase c = kernelCases(DType::f32)[0];  // conv 3x3 with bias
  ASSERT_EQ(c.op, "conv2d");
  for (Array& a : c.inputs) a = rounded(a);
  c.outputs[0].first = DType::bf16;
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(irOf(c), &context);
  ASSERT_TRUE(module);
  Program compiled = compile(*module, {});
  std::vector<std::byte> bytes = programFileBytes(compiled);
  Program read = readProgramBytes(bytes, "bf16 program");
  auto cpu = std::make_shared<CpuDevice>();
  Array a = Executor(compiled, cpu).run(c.inputs)[0], b = Executor(read, cpu).run(c.inputs)[0];
  ASSERT_EQ(b.dtype, DType::bf16);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
  // spmd-run runs the file on bf16 inputs of its own.
  const std::string file = dir / "bf16.spmd";
  saveProgram(compiled, file);
  auto run = testing::runCommand(testing::spmdRunPath() + " " + file + " --devices cpu:1 --steps 1 --warmup 0");
  EXPECT_EQ(run.status, 0) << run.output;
}

// Mixed precision on N devices against 1 device: ResNet-18 (width 2, cross-replica BatchNorm, so
// that every device count computes the same function) with bf16 activations, convolutions and
// matmuls, 2 SGD steps at global batch 8. Each device count rounds other partial results to bf16
// (each replica's gradients before their f32 pmean), so the runs agree to bf16 rounding, not to
// the bit, and bf16 rounding is coarse here: most gradients of this small network are sums whose
// terms cancel (BatchNorm's backward, the biases), so 2^-8 on each term is tens of percent of
// the sum, and the bf16 updates lie 1.6 (tree-relative, tests/unit/TreeCompare.h) from the f32
// ones. The bounds: cpu:2 and cpu:4's parameter updates (new - initial) within kNDevicesBf16 of
// cpu:1's and within half the bf16-to-f32 distance; the new BatchNorm statistics within 1e-2;
// the losses within 1e-3 relative. f32 on cpu:2 against cpu:1 is printed beside them.
TEST(Bf16Test, MixedPrecisionOnNDevicesIsOneDeviceWithinBf16Rounding) {
  constexpr double kNDevicesBf16 = 0.5;
  const optim::SgdConfig sgd{.learningRate = 0.1, .momentum = 0.9};
  auto model = models::resnet18({.width = 2, .bnAxisName = "batch"});
  auto [params, state] = testing::kaimingInit(*model, DType::f32);
  Array x = testing::randomArray(DType::f32, {8, 1, 16, 16}, 5, -1, 1), y = Array::zeros(DType::i32, {8});
  for (int64_t i = 0; i < 8; ++i) y.values<int32_t>()[i] = int32_t((3 * i + 1) % 10);
  auto run = [&](const std::string& devices, DType compute) {
    auto step = pmap(
        [&](const Tree& p, const Tree& s, const Tree& opt, const Tensor& xs, const Tensor& ys) {
          auto [loss, grads, newState] = value_and_grad(
              [&](const Tree& q) {
                auto [logits, n] = model->apply(q, s, xs, {.training = true, .compute = compute});
                return std::pair{mean(softmaxCrossEntropy(logits, ys), {0}), n};
              },
              has_aux)(p);
          auto [newParams, newOpt] = optim::Sgd(sgd).update(p, grads, opt);
          return std::tuple{newParams, newState, newOpt, loss};
        },
        {.inAxes = {replicated, replicated, replicated, split, split}, .devices = devices});
    Tree p = params, s = state, opt = optim::Sgd(sgd).init(params);
    std::vector<double> losses;
    for (int t = 0; t < 2; ++t) {
      auto [np, ns, nopt, loss] = step(p, s, opt, x, y);
      p = np, s = ns, opt = nopt;
      losses.push_back(testing::valueAt(loss.array(), 0));
    }
    Tree update = testing::mapTree(p, [&](const std::string& name, const Array& a) {
      Array d = Array::zeros(DType::f64, a.shape);
      for (int64_t i = 0; i < a.numel(); ++i)
        d.values<double>()[i] = testing::valueAt(a, i) - testing::valueAt(params.at(name).array(), i);
      return d;
    });
    for (const auto& [name, t] : p) EXPECT_EQ(t.dtype(), DType::f32) << name << ": the master weights stay f32";
    return std::tuple{update, s, losses};
  };
  auto [update1, state1, losses1] = run("cpu:1", DType::bf16);
  auto [update32, state32, losses32] = run("cpu:1", DType::f32);
  const double fromF32 = testing::treeError(update1, update32);
  EXPECT_GT(fromF32, 1e-3) << "the bf16 steps are the f32 steps: ApplyOptions::compute did nothing";
  const double f32Devices = testing::treeError(std::get<0>(run("cpu:2", DType::f32)), update32);
  for (const std::string devices : {"cpu:2", "cpu:4"}) {
    auto [update, newState, losses] = run(devices, DType::bf16);
    const double updateError = testing::treeError(update, update1), stateError = testing::treeError(newState, state1);
    EXPECT_LT(updateError, kNDevicesBf16) << devices;
    EXPECT_LT(updateError, fromF32 / 2) << devices;
    EXPECT_LT(stateError, 1e-2) << devices;
    for (size_t t = 0; t < losses.size(); ++t) EXPECT_NEAR(losses[t], losses1[t], 1e-3 * std::fabs(losses1[t])) << devices;
    std::printf("  %s vs cpu:1 in bf16: updates %.2e, BatchNorm state %.2e, losses %.5f %.5f vs %.5f %.5f "
                "(cpu:1 bf16 vs f32 updates %.2e; cpu:2 vs cpu:1 in f32 %.2e)\n", devices.c_str(), updateError,
                stateError, losses[0], losses[1], losses1[0], losses1[1], fromF32, f32Devices);
  }
}

}  // namespace
}  // namespace spmd
