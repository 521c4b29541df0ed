// The CPU's kernel variants (runtime/cpu/CpuVariants.h: the convolutions' and matmul's): each
// one, pinned, runs exactly on the kernel cases its list entry says it runs on (asserted by the
// name of the variant that ran, never by timing) and matches the reference kernel there;
// elsewhere the pin is passed over. Each variant that says its bits do not depend on the thread
// count gives the same bits on 1 and 2 threads. An unpinned step is timed once and then
// remembered (a timed run another process slowed is timed again); pinning an unknown variant is a
// clear error listing the valid ones, and so is pinning a thread-dependent one under
// SPMD_THREAD_INVARIANT.
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "KernelCases.h"
#include "TestUtil.h"
#include "runtime/base/BFloat16.h"
#include "runtime/base/MachineLoad.h"
#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/cpu/SlicedOnednn.h"
#include "runtime/program/OpAttrs.h"

namespace spmd::runtime {
namespace {

bool hasVariants(const KernelCase& c) {
  for (const VariantSet* set : cpu::cpuVariantSets())
    if (c.op == set->op) return true;
  return false;
}

// Whether the list entry `v` says it runs on case `c` (its operands as runKernel lays them out).
bool claims(const KernelVariant& v, const KernelCase& c) {
  Step step{c.op, {}, {}, c.attrs, "ConvVariantTest"};
  decodeAttributes(step);
  std::vector<Array> inputs = inputsInLayout(c), outputs;
  std::vector<TensorView> in, out;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({inputs[i].data(), inputs[i].dtype, inputs[i].shape, c.layout(i)});
  for (auto& [dtype, shape] : c.outputs) outputs.push_back(Array::zeros(dtype, shape));
  for (size_t i = 0; i < outputs.size(); ++i)
    out.push_back({outputs[i].data(), outputs[i].dtype, outputs[i].shape, c.layout(inputs.size() + i)});
  std::shared_ptr<void> cache;
  KernelCall call{step, in, out, cache};
  return !v.runs || v.runs(call);
}

std::string nameOf(const std::string& ran) { return ran.substr(0, ran.find(':')); }

// oneDNN's sliced kernels cut even the small cases into their most slices (a shorter last one
// included) while the guard lives.
struct SmallestSlices {
  SmallestSlices() { cpu::sliced::setSliceWork(1); }
  ~SmallestSlices() { cpu::sliced::setSliceWork(0); }
};

TEST(ConvVariantTest, EachVariantRunsExactlyWhereItsEntrySaysAndMatchesTheReference) {
  SmallestSlices slices;
  std::map<std::string, int> ran;  // "op variant" -> cases it ran on
  std::map<std::string, std::set<std::string>> byCase;
  for (DType t : {DType::f32, DType::f64})
    for (const KernelCase& c : kernelCases(t)) {
      if (!hasVariants(c)) continue;
      const std::vector<Array> expected = runKernel(referenceKernels(), plainCase(c));
      for (const KernelVariant& v : cpu::cpuVariants(c.op).variants) {
        SCOPED_TRACE(c.name + ", pinned " + v.name);
        PinnedKernels pin(c.op + ":" + v.name);
        std::string which;
        const std::vector<Array> actual = runKernel(cpuKernels(), c, &which);
        const bool claimed = claims(v, c);
        EXPECT_EQ(nameOf(which) == v.name, claimed) << "ran " << which;
        if (nameOf(which) != v.name) continue;
        ++ran[c.op + " " + v.name];
        byCase[c.name].insert(v.name);
        const bool f64 = t == DType::f64;
        spmd::testing::expectClose(actual[0], expected[0], f64 ? 1e-12 : 1e-4, f64 ? 1e-12 : 1e-5, c.name + " " + v.name);
      }
    }
  // Every variant of every direction ran somewhere.
  for (const VariantSet* set : cpu::cpuVariantSets())
    for (const KernelVariant& v : set->variants)
      if (std::string(v.name) != "own" || cpu::cpuOwnIsa() != cpu::OwnIsa::portable) {  // own: vector CPUs only
        EXPECT_GT(ran[std::string(set->op) + " " + v.name], 0) << set->op << " " << v.name << " ran on no case";
      }
  // Spot checks, written from the shapes alone: Winograd's paths on 3x3 stride-1 blocked steps
  // (grouped up to 64 channels), the GEMMs on stride-2 blocked ones, the one-channel filter
  // gradient on the stem, only oneDNN (direct and sliced) on plain f32 convolutions, our GEMM too on f32 matmuls, only the direct f64
  // loops on f64 convolutions and the reference loops on f64 matmuls.
  using Names = std::set<std::string>;
  EXPECT_EQ(byCase["conv grouped winograd"], (Names{"winograd_grouped", "winograd_chunked", "winograd_4x4", "onednn", "onednn_sliced"}));
  EXPECT_EQ(byCase["conv winograd"], (Names{"winograd_chunked", "winograd_4x4", "onednn", "onednn_sliced"}));
  EXPECT_EQ(byCase["conv stride2 gemm"], (Names{"strided_gemm", "onednn", "onednn_sliced"}));
  EXPECT_EQ(byCase["conv bwd filter 1 channel"], (Names{"single_channel", "onednn", "onednn_sliced"}));
  EXPECT_EQ(byCase["conv 3x3 pad1 bias/f32"], (Names{"onednn", "onednn_sliced"}));
  EXPECT_EQ(byCase["conv 3x3 pad1 bias/f64"], (Names{"direct_f64"}));
  EXPECT_EQ(byCase["matmul sliced A^T bias/f32"], cpu::cpuOwnIsa() == cpu::OwnIsa::portable
                                                     ? (Names{"onednn", "onednn_sliced"})
                                                     : (Names{"own", "onednn", "onednn_sliced"}));
  EXPECT_EQ(byCase["matmul sliced A^T bias/f64"], (Names{"reference"}));
  // Dilated or grouped: oneDNN alone in f32, the reference loops in f64.
  EXPECT_EQ(byCase["conv 3 groups stride2/f32"], (Names{"onednn"}));
  EXPECT_EQ(byCase["conv 4 groups dilated blocked"], (Names{"onednn"}));
  EXPECT_EQ(byCase["conv dilated 2x2/f64"], (Names{"reference"}));
}

// With SPMD_THREAD_INVARIANT=1 (oneDNN's sums may split by thread) a dilated or grouped f32
// convolution runs the reference loops, blocked operands relaid into plain copies around them.
TEST(ConvVariantTest, DilatedAndGroupedConvolutionsRunTheReferenceLoopsUnderThreadInvariantKernels) {
  setThreadInvariantKernels(true);
  int blocked = 0, ran = 0;
  for (const KernelCase& c : kernelCases(DType::f32)) {
    if (!hasVariants(c) || (!c.attrs.count("dilation") && !c.attrs.count("groups"))) continue;
    SCOPED_TRACE(c.name);
    std::string which;
    const std::vector<Array> actual = runKernel(cpuKernels(), c, &which);
    EXPECT_EQ(nameOf(which), "reference") << which;
    spmd::testing::expectSameBits(actual[0], runKernel(referenceKernels(), plainCase(c))[0], c.name);
    blocked += !c.layouts.empty(), ++ran;
  }
  setThreadInvariantKernels(std::nullopt);
  EXPECT_GE(ran, 12);
  EXPECT_GE(blocked, 3);
}

// The direct f64 convolutions (cpu/DirectF64Conv.h) give the reference loops' bits, not just
// their values: on shapes with odd channel counts (a short last lane block), non-square filters,
// unequal strides and paddings, infinities in the filter, the input and the result gradient
// (a tap outside the image is skipped, as the reference skips it, never multiplied by a zero
// pad: 0 * inf would be NaN) and a -0 bias, on every ISA copy and on 1 and 2 threads.
TEST(ConvVariantTest, DirectF64ConvolutionsGiveTheReferenceLoopsBits) {
  using V = std::vector<int64_t>;
  struct Geometry { Shape x, w, y; V stride, padding; };
  const double inf = std::numeric_limits<double>::infinity();
  uint64_t seed = 77;
  auto rnd = [&](const Shape& shape) { return spmd::testing::randomArray(DType::f64, shape, seed++, -1, 1); };
  auto withInfinities = [](Array a, std::initializer_list<int64_t> at, double value) {
    for (int64_t i : at) a.values<double>()[i] = value;
    return a;
  };
  std::vector<KernelCase> cases;
  for (const Geometry& g : {Geometry{{2, 11, 9, 8}, {13, 11, 5, 3}, {2, 13, 5, 8}, {2, 1}, {2, 1}},
                            Geometry{{3, 9, 7, 10}, {9, 9, 3, 3}, {3, 9, 7, 10}, {1, 1}, {1, 1}},
                            Geometry{{2, 5, 7, 9}, {3, 5, 1, 1}, {2, 3, 4, 5}, {2, 2}, {0, 0}}}) {
    const std::map<std::string, Attr> attrs = {{"stride", g.stride}, {"padding", g.padding}};
    // The filter's first taps and an input corner: windows at the border skip them.
    Array w = withInfinities(rnd(g.w), {0, 1}, inf), x = withInfinities(rnd(g.x), {0}, -inf);
    Array bias = rnd({g.w[0]});
    bias.values<double>()[0] = -0.0;
    cases.push_back({"conv", "conv2d", {x, w, bias}, {{DType::f64, g.y}}, attrs});
    std::map<std::string, Attr> relu = attrs;
    relu["relu"] = true;
    cases.push_back({"conv relu, no bias", "conv2d", {x, w}, {{DType::f64, g.y}}, relu});
    Array dy = withInfinities(rnd(g.y), {0, 5}, inf);
    cases.push_back({"bwd data", "conv2d_backward_data", {dy, w}, {{DType::f64, g.x}}, attrs});
    cases.push_back({"bwd filter", "conv2d_backward_filter", {x, dy}, {{DType::f64, g.w}}, attrs});
  }
  std::vector<cpu::OwnIsa> isas = {cpu::OwnIsa::portable};
  for (cpu::OwnIsa isa : {cpu::OwnIsa::avx2, cpu::OwnIsa::avx512})
    if (isa <= cpu::cpuOwnIsa()) isas.push_back(isa);
  const int threads = omp_get_max_threads();
  int compared = 0;
  for (const KernelCase& c : cases) {
    const std::vector<Array> expected = runKernel(referenceKernels(), c);
    PinnedKernels pin(c.op + ":direct_f64");
    for (cpu::OwnIsa isa : isas)
      for (int t : {1, 2}) {
        SCOPED_TRACE(c.name + " " + shapeString(c.inputs[0].shape) + " on " + cpu::ownIsaName(isa) + ", " +
                     std::to_string(t) + " threads");
        const std::optional<cpu::OwnIsa> cap = cpu::setOwnIsaCap(isa);
        omp_set_num_threads(t);
        std::string which;
        const std::vector<Array> actual = runKernel(cpuKernels(), c, &which);
        omp_set_num_threads(threads);
        cpu::setOwnIsaCap(cap);
        ASSERT_EQ(nameOf(which), "direct_f64");
        ASSERT_EQ(actual[0].bytes(), expected[0].bytes());
        EXPECT_EQ(std::memcmp(actual[0].data(), expected[0].data(), expected[0].bytes()), 0) << "the bits differ";
        ++compared;
      }
  }
  EXPECT_EQ(compared, int(cases.size() * isas.size() * 2));
  // The infinities reached the outputs as the reference has them: some infinite, some NaN
  // (inf - inf), the rest finite (the skipped taps).
  int infinite = 0, finite = 0;
  for (const KernelCase& c : cases) {
    const std::vector<Array> outputs = runKernel(referenceKernels(), c);  // held: the loop reads into it
    for (double v : outputs[0].values<double>()) (std::isfinite(v) ? finite : infinite)++;
  }
  EXPECT_GT(infinite, 0);
  EXPECT_GT(finite, infinite);
}

// oneDNN's sliced kernels, pinned on every f32 case they run on, mixed layouts included (a plain
// input beside a blocked result, where oneDNN's only primitive is its reference loops, ~500x
// slower than its direct kernels): none is made on the reference loops.
TEST(ConvVariantTest, SlicedKernelsNeverRunOneDnnsReferenceLoops) {
  SmallestSlices slices;
  int ran = 0;
  for (const KernelCase& c : kernelCases(DType::f32)) {
    if (!hasVariants(c)) continue;
    SCOPED_TRACE(c.name);
    PinnedKernels pin(c.op + ":onednn_sliced");
    const int64_t before = cpu::sliced::referenceKernels();
    std::string which;
    runKernel(cpuKernels(), c, &which);
    if (nameOf(which) != "onednn_sliced") continue;
    ++ran;
    EXPECT_EQ(cpu::sliced::referenceKernels(), before) << "oneDNN's reference loops";
  }
  EXPECT_GT(ran, 20);
}

// Each variant that says its bits do not depend on the thread count, pinned, on every case it
// runs on: 1 and 2 OpenMP threads give the same bits (oneDNN's own backward weights, for one, do
// not promise that).
TEST(ConvVariantTest, ThreadInvariantVariantsGiveTheSameBitsOnOneAndTwoThreads) {
  SmallestSlices slices;
  const int threads = omp_get_max_threads();
  int compared = 0;
  for (const KernelCase& c : kernelCases(DType::f32)) {
    if (!hasVariants(c)) continue;
    for (const KernelVariant& v : cpu::cpuVariants(c.op).variants) {
      if (!v.threadInvariant || !claims(v, c)) continue;
      SCOPED_TRACE(c.name + ", pinned " + v.name);
      PinnedKernels pin(c.op + ":" + v.name);
      omp_set_num_threads(1);
      const std::vector<Array> one = runKernel(cpuKernels(), c);
      omp_set_num_threads(2);
      std::string which;
      const std::vector<Array> two = runKernel(cpuKernels(), c, &which);
      omp_set_num_threads(threads);
      ASSERT_EQ(nameOf(which), v.name);
      EXPECT_EQ(std::memcmp(one[0].data(), two[0].data(), one[0].bytes()), 0) << "the bits differ";
      ++compared;
    }
  }
  EXPECT_GT(compared, 40);
}

TEST(ConvVariantTest, PinningAThreadDependentVariantUnderThreadInvariantKernelsIsAClearError) {
  PinnedKernels pin("conv2d_backward_filter:onednn");
  setThreadInvariantKernels(true);
  std::string message;
  for (const KernelCase& c : kernelCases(DType::f32))
    if (c.op == "conv2d_backward_filter") {
      message = spmd::testing::errorOf([&] { runKernel(cpuKernels(), c); });
      break;
    }
  setThreadInvariantKernels(std::nullopt);
  EXPECT_NE(message.find("SPMD_KERNELS pins conv2d_backward_filter to 'onednn', whose bits depend on the thread "
                         "count, while SPMD_THREAD_INVARIANT=1"),
            std::string::npos)
      << message;
}

TEST(ConvVariantTest, AnUnpinnedStepIsTimedOnceThenRemembered) {
  if (!kernelTiming()) GTEST_SKIP() << "SPMD_KERNEL_TIMING=0";
  PinnedKernels none("");
  for (const KernelCase& c : kernelCases(DType::f32)) {
    if (c.name != "conv grouped winograd") continue;
    std::string first, second;
    runKernel(cpuKernels(), c, &first);
    runKernel(cpuKernels(), c, &second);  // a new step of the same shapes
    // The first may find a choice an earlier run left in the kernel cache.
    EXPECT_TRUE(first.find("timed") != std::string::npos || first.find("chosen before") != std::string::npos) << first;
    EXPECT_NE(second.find("chosen before"), std::string::npos) << second;
    EXPECT_EQ(nameOf(first), nameOf(second));
    return;
  }
  FAIL() << "no case 'conv grouped winograd'";
}

// A timed choice holds for a CPU kind: the model name with its family and model numbers (the
// first processor's), so that two generations a hypervisor names alike ("AMD EPYC") do not share
// choices through one kernel cache; and this machine's steps are keyed by it.
TEST(ConvVariantTest, TheCpuKindNamesTheFamilyAndModelBesideTheModelName) {
  auto kindOf = [](const std::string& text) {
    std::istringstream in(text);
    return cpu::cpuKind(in);
  };
  const std::string zen2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n"
                           "model name\t: AMD EPYC\nstepping\t: 0\n\n";
  const std::string zen3 = "processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
                           "model name\t: AMD EPYC\n\n";
  EXPECT_EQ(kindOf(zen2), "AMD EPYC (family 23 model 49)");
  EXPECT_EQ(kindOf(zen3 + zen2), "AMD EPYC (family 25 model 1)") << "the first processor's";
  EXPECT_NE(kindOf(zen2), kindOf(zen3));
  EXPECT_EQ(kindOf("model name\t: Intel(R) Xeon(R) Platinum 8488C\n"), "Intel(R) Xeon(R) Platinum 8488C")
      << "without the numbers, the name alone";
  EXPECT_EQ(kindOf(""), "unknown CPU");
  EXPECT_EQ(kindOf("cpu family\t: 6\nmodel\t: 143\n"), "unknown CPU (family 6 model 143)");
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  const std::string kind = cpu::cpuKind(cpuinfo), device = cpu::cpuVariants("conv2d").device();
  EXPECT_EQ(device.rfind(kind + ", oneDNN ", 0), 0u) << device;
}

// A stub op's two variants: "slow" sleeps, "fast" counts its runs; each writes its own mark.
std::atomic<int> fastRuns{0};
void slowVariant(KernelCall& call) {
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  call.out[0].as<float>()[0] = 1.f;
}
void fastVariant(KernelCall& call) {
  ++fastRuns;
  call.out[0].as<float>()[0] = 2.f;
}

// A step of a stub op (one float in, `y` out) with these variants, run through runVariant; `ran`
// says which variant ran and why.
struct StubStep {
  VariantSet set;
  Step step;
  const std::vector<int64_t> shape{1};
  float x = 0, y = 0;
  const std::vector<TensorView> in{{&x, DType::f32, shape, ""}}, out{{&y, DType::f32, shape, ""}};
  std::shared_ptr<void> cache;
  std::string ran;
  KernelCall call{step, in, out, cache};

  StubStep(const char* op, std::vector<KernelVariant> variants)
      : set{op, "cpu", std::move(variants), [] { return std::string("ConvVariantTest's stub device"); },
            [] { return std::string("none"); }, [] { return std::string("threads 1"); }},
        step{op, {}, {}, {}, "ConvVariantTest"} {
    call.variant = &ran;
  }
  void run() { runVariant(call, set); }
};

// Timing runs each candidate on the step's own buffers, the fastest so far last in each round:
// the winner's timed run is the first call's result, and the step does not run it again.
TEST(ConvVariantTest, TheWinnersTimedRunIsTheFirstCallsResult) {
  if (!kernelTiming()) GTEST_SKIP() << "SPMD_KERNEL_TIMING=0";
  // A fresh kernel cache, so that the choice is timed (ctest runs each test in its own process,
  // before the process's choices are loaded).
  const auto dir = std::filesystem::temp_directory_path() / ("spmd-winner-" + std::to_string(::getpid()));
  setenv("SPMD_KERNEL_CACHE", dir.c_str(), 1);
  PinnedKernels none("");
  // No run waits for a core (a loaded machine's would be timed again: the test below).
  setRunQueueSource([] { return 0.0; });
  StubStep stub("stub_op", {{"slow", "sleeps 5 ms", true, nullptr, nullptr, slowVariant},
                            {"fast", "counts its runs", true, nullptr, nullptr, fastVariant}});
  stub.run();
  setRunQueueSource(nullptr);
  std::filesystem::remove_all(dir);
  unsetenv("SPMD_KERNEL_CACHE");
  if (stub.ran.find("timed") == std::string::npos) GTEST_SKIP() << "the process's choices were loaded before: " << stub.ran;
  EXPECT_EQ(nameOf(stub.ran), "fast") << stub.ran;
  EXPECT_EQ(stub.y, 2.f) << "the first call's output is not the winner's";
  // Once to warm up and once timed (slow is over 1.5x at once): not a third time for the step.
  EXPECT_EQ(fastRuns.load(), 2);
  stub.y = 0;
  stub.run();  // later calls run it
  EXPECT_EQ(stub.y, 2.f);
  EXPECT_EQ(fastRuns.load(), 3);
}

// Runs that another process slowed (their thread waited for a core: /proc/thread-self/schedstat,
// here a stubbed source) do not decide a choice: a stub op whose fast variant's first timed run
// waited 15 ms for a core, and took 20, is timed again and chosen; one that waits on every run
// loses to the slow one, after a bounded number of runs.
std::atomic<int> burstRuns{0};
std::atomic<bool> burstEveryRun{false};
std::atomic<double> waitedSoFar{0};
void spinFor(double ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double, std::milli>(ms);
  while (std::chrono::steady_clock::now() < end) {
  }
}
void steadyVariant(KernelCall& call) {
  spinFor(6);
  call.out[0].as<float>()[0] = 1.f;
}
void burstVariant(KernelCall& call) {
  const int run = ++burstRuns;  // 1: the warm-up, 2: the first timed run
  if (run == 2 || (burstEveryRun && run > 1)) {
    waitedSoFar = waitedSoFar + 0.015;
    spinFor(20);
  } else {
    spinFor(2);
  }
  call.out[0].as<float>()[0] = 2.f;
}

TEST(ConvVariantTest, ARunSlowedByAnotherProcessIsTimedAgain) {
  if (!kernelTiming()) GTEST_SKIP() << "SPMD_KERNEL_TIMING=0";
  const auto dir = std::filesystem::temp_directory_path() / ("spmd-burst-" + std::to_string(::getpid()));
  setenv("SPMD_KERNEL_CACHE", dir.c_str(), 1);
  setRunQueueSource([] { return waitedSoFar.load(); });
  PinnedKernels none("");
  auto choose = [](const char* op) {
    StubStep stub(op, {{"steady", "spins 6 ms", true, nullptr, nullptr, steadyVariant},
                       {"burst", "spins 2 ms, 20 when its thread waits for a core", true, nullptr, nullptr, burstVariant}});
    stub.run();
    return stub.ran;
  };
  const std::string once = choose("stub_burst_once");
  const int onceRuns = burstRuns.exchange(0);
  burstEveryRun = true;
  const std::string always = choose("stub_burst_always");
  const int alwaysRuns = burstRuns.load();
  setRunQueueSource(nullptr);
  std::filesystem::remove_all(dir);
  unsetenv("SPMD_KERNEL_CACHE");
  if (once.find("timed") == std::string::npos) GTEST_SKIP() << "the process's choices were loaded before: " << once;
  EXPECT_EQ(nameOf(once), "burst") << once;  // timed again: 2 ms, where the disturbed run took 20
  EXPECT_GE(onceRuns, 3);
  EXPECT_EQ(nameOf(always), "steady") << always;  // every run of it waited: its least time stands
  EXPECT_LE(alwaysRuns, 7) << "a variant whose every run waits is timed at most 6 rounds after its warm-up";
}

// SPMD_TIGHT_ROUNDING=1 leaves out the variants with loose rounding (on the CPU: Winograd
// F(4x4, 3x3) and only it): unpinned, a stub op whose faster variant is one runs the other
// untimed; a pin to one is a clear error.
TEST(ConvVariantTest, TightRoundingLeavesLooseVariantsOut) {
  for (const VariantSet* set : cpu::cpuVariantSets())
    for (const KernelVariant& v : set->variants)
      EXPECT_EQ(v.looseRounding, std::string(v.name) == "winograd_4x4") << set->op << " " << v.name;
  PinnedKernels none("");
  KernelVariant fast{"fast", "counts its runs", true, nullptr, nullptr, fastVariant};
  fast.looseRounding = true;
  StubStep stub("stub_tight_op", {fast, {"slow", "sleeps 5 ms", true, nullptr, nullptr, slowVariant}});
  setTightRoundingKernels(true);
  const int before = fastRuns.load();
  stub.run();
  EXPECT_EQ(nameOf(stub.ran), "slow") << stub.ran;
  EXPECT_EQ(stub.y, 1.f);
  EXPECT_EQ(fastRuns.load(), before) << "a variant with loose rounding ran";
  std::string message;
  {
    PinnedKernels pin("conv2d:winograd_4x4");
    for (const KernelCase& c : kernelCases(DType::f32))
      if (c.name == "conv winograd") message = spmd::testing::errorOf([&] { runKernel(cpuKernels(), c); });
  }
  setTightRoundingKernels(std::nullopt);
  EXPECT_NE(message.find("SPMD_KERNELS pins conv2d to 'winograd_4x4', whose f32 rounding error is several times "
                         "the direct kernels', while SPMD_TIGHT_ROUNDING=1"),
            std::string::npos)
      << message;
}

// A set that widens bf16 steps (VariantSet::widensBf16: the CPU's where oneDNN's bf16 kernels
// run) has its f32-only variants among a bf16 step's candidates, each run on exact f32 copies of
// the operands with its results rounded once: a stub op whose bf16 kernel is slow runs the fast
// f32 one so, chosen by timing, and says so; a set that does not widen never runs it on bf16.
std::atomic<int> f32OnlyRuns{0};
void slowBf16Variant(KernelCall& call) {  // y = x, slowly
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  call.out[0].as<bf16>()[0] = call.in[0].as<bf16>()[0];
}
void tripleF32Variant(KernelCall& call) {  // y = 3x in f32
  ++f32OnlyRuns;
  call.out[0].as<float>()[0] = 3.0f * call.in[0].as<float>()[0];
}
bool onBf16(const KernelCall& call) { return call.in[0].dtype == DType::bf16; }
bool onF32(const KernelCall& call) { return call.in[0].dtype == DType::f32; }

TEST(ConvVariantTest, ABf16StepRunsAnF32VariantBetweenRoundingsWhereTheSetWidens) {
  if (!kernelTiming()) GTEST_SKIP() << "SPMD_KERNEL_TIMING=0";
  const auto dir = std::filesystem::temp_directory_path() / ("spmd-widened-" + std::to_string(::getpid()));
  setenv("SPMD_KERNEL_CACHE", dir.c_str(), 1);
  PinnedKernels none("");
  setRunQueueSource([] { return 0.0; });
  const std::vector<int64_t> shape{1};
  const float x = 1.0f + 0x1p-7f;  // a bf16 value: 3x (3 + 3 * 2^-7) is not, and rounds to 3 + 2^-5
  auto run = [&](const char* op, bool widens) {
    VariantSet set{op, "cpu",
                   {{"bf16_kernel", "bf16 in and out, 5 ms", true, &onBf16, nullptr, &slowBf16Variant},
                    {"f32_only", "f32 in and out", true, &onF32, nullptr, &tripleF32Variant}},
                   [] { return std::string("ConvVariantTest's stub device"); }, [] { return std::string("none"); },
                   [] { return std::string("threads 1"); }};
    if (widens) set.widensBf16 = [](const KernelCall&) { return true; };
    bf16 in = toBf16(x), out{};
    const std::vector<TensorView> ins{{&in, DType::bf16, shape, ""}}, outs{{&out, DType::bf16, shape, ""}};
    Step step{op, {}, {}, {}, "ConvVariantTest"};
    std::shared_ptr<void> cache;
    std::string ran;
    KernelCall call{step, ins, outs, cache};
    call.variant = &ran;
    runVariant(call, set);
    return std::pair{ran, fromBf16(out)};
  };
  const int before = f32OnlyRuns.load();
  const auto [plainRan, plainY] = run("stub_bf16_plain", false);
  EXPECT_EQ(nameOf(plainRan), "bf16_kernel") << plainRan;
  EXPECT_EQ(plainY, fromBf16(toBf16(x)));
  EXPECT_EQ(f32OnlyRuns.load(), before) << "an f32-only variant ran on bf16 operands in a set that does not widen";
  const auto [wideRan, wideY] = run("stub_bf16_widened", true);
  setRunQueueSource(nullptr);
  std::filesystem::remove_all(dir);
  unsetenv("SPMD_KERNEL_CACHE");
  if (wideRan.find("timed") == std::string::npos) GTEST_SKIP() << "the process's choices were loaded before: " << wideRan;
  EXPECT_EQ(nameOf(wideRan), "f32_only") << wideRan;
  EXPECT_NE(wideRan.find("(in f32 between bf16 roundings)"), std::string::npos) << wideRan;
  EXPECT_EQ(wideY, roundToBf16(3.0f * x)) << "the f32 result rounded once to bf16";
  EXPECT_EQ(wideY, 3.0f + 0x1p-5f);
  EXPECT_GT(f32OnlyRuns.load(), before);
}

TEST(ConvVariantTest, PinningAnUnknownVariantIsAClearError) {
  PinnedKernels pin("conv2d:fastest");
  for (const KernelCase& c : kernelCases(DType::f32)) {
    if (c.name != "conv 3x3 pad1 bias/f32") continue;  // one variant runs: the pin is still checked
    const std::string message = spmd::testing::errorOf([&] { runKernel(cpuKernels(), c); });
    EXPECT_NE(message.find("SPMD_KERNELS pins conv2d to 'fastest', which is not a variant"), std::string::npos)
        << message;
    EXPECT_NE(message.find("winograd_grouped, winograd_chunked, winograd_4x4, strided_gemm, onednn, onednn_sliced, direct_f64"),
              std::string::npos)
        << message;
    return;
  }
  FAIL() << "no case 'conv 3x3 pad1 bias'";
}

}  // namespace
}  // namespace spmd::runtime
