// Kernel choices by measurement (runtime/device/KernelChoice.h), the host side without a GPU: a
// stubbed variant list stands for cuDNN's algorithms. Nondeterministic variants (and, in strict
// f32, TF32 ones) are never timed or chosen; a remembered or persisted choice is taken without
// timing; process 0's choice is taken by every other process; a choice made on another device
// kind is not used, and a process on another kind than process 0's is refused; pins win, and a
// bad pin is refused listing the variants.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "TestUtil.h"
#include "runtime/base/MachineLoad.h"
#include "runtime/device/Job.h"
#include "runtime/device/KernelChoice.h"

namespace spmd::runtime {
namespace {

using spmd::testing::errorOf;

const std::vector<Variant> kAlgorithms = {
    {"0", true, false},   // deterministic, slow
    {"1", false, false},  // nondeterministic (atomics), the fastest of all
    {"2", true, true},    // TF32 on tensor cores
    {"6", true, false},   // deterministic, the fastest allowed in strict f32
};
const ChoiceKey kH100{"NVIDIA H100 80GB HBM3 (sm_90)", "cuDNN 91000", "conv2d_forward",
                      "f32 x[64, 64, 28, 28] w[64, 64, 3, 3] stride 1 1 padding 1 1"};

// Times by name (ms), recording what it was asked to time.
struct StubTimer {
  std::map<std::string, double> ms = {{"0", 9}, {"1", 1}, {"2", 2}, {"6", 4}};
  std::vector<std::string> asked;
  std::function<std::vector<double>(const std::vector<Variant>&)> fn() {
    return [this](const std::vector<Variant>& variants) {
      std::vector<double> seconds;
      for (const Variant& v : variants) asked.push_back(v.name), seconds.push_back(ms.at(v.name) * 1e-3);
      return seconds;
    };
  }
};

auto noTiming() {
  return [](const std::vector<Variant>&) -> std::vector<double> {
    ADD_FAILURE() << "timed, but the choice should have been taken without timing";
    return {};
  };
}

std::string tempFile(const std::string& name) {
  static const testing::ScratchDir dir("spmd-kernel-choice");
  std::filesystem::remove(dir.path() / name);
  return dir / name;
}

TEST(KernelChoiceTest, NondeterministicVariantsAreNeverTimedOrChosen) {
  KernelChoices choices;
  StubTimer timer;
  Choice c = choices.choose(kH100, kAlgorithms, /*strictF32=*/true, timer.fn());
  EXPECT_EQ(c.variant, "6");
  EXPECT_EQ(c.from, Choice::From::Timed);
  EXPECT_EQ(timer.asked, (std::vector<std::string>{"0", "6"})) << "neither the nondeterministic nor the TF32 one runs";
  EXPECT_NE(c.why.find("the fastest of 2 timed (4.000 ms)"), std::string::npos) << c.why;
  // With TF32 allowed, the tensor-core variant competes; the nondeterministic one still does not.
  KernelChoices tf32;
  StubTimer again;
  EXPECT_EQ(tf32.choose(kH100, kAlgorithms, /*strictF32=*/false, again.fn()).variant, "2");
  EXPECT_EQ(again.asked, (std::vector<std::string>{"0", "2", "6"}));
  // Nothing allowed: an error naming each variant and why.
  std::string message = errorOf([&] {
    KernelChoices none;
    none.choose(kH100, {{"1", false, false}, {"2", true, true}}, true, StubTimer().fn());
  });
  EXPECT_NE(message.find("no variant of conv2d_forward"), std::string::npos) << message;
  EXPECT_NE(message.find("1: its bits differ between runs (nondeterministic)"), std::string::npos) << message;
  EXPECT_NE(message.find("2: it rounds f32 to TF32 on tensor cores (SPMD_ALLOW_TF32=1 allows it)"), std::string::npos)
      << message;
  // A variant that fails to run (NaN) is passed over.
  KernelChoices failing;
  StubTimer broken;
  broken.ms["6"] = std::nan("");
  EXPECT_EQ(failing.choose(kH100, kAlgorithms, true, broken.fn()).variant, "0");
}

TEST(KernelChoiceTest, APersistedChoiceIsUsedWithoutTiming) {
  const std::string path = tempFile("choices.json");
  {
    KernelChoices first(path);
    StubTimer timer;
    EXPECT_EQ(first.choose(kH100, kAlgorithms, true, timer.fn()).variant, "6");
    EXPECT_EQ(first.choose(kH100, kAlgorithms, true, noTiming()).from, Choice::From::Remembered);
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  KernelChoices later(path);  // a later run on the same device kind
  Choice c = later.choose(kH100, kAlgorithms, true, noTiming());
  EXPECT_EQ(c.variant, "6");
  EXPECT_EQ(c.from, Choice::From::Remembered);
  EXPECT_NE(c.why.find(path), std::string::npos) << c.why;
  EXPECT_EQ(later.remembered().size(), 1u);
  // Another shape is a new choice, timed, and kept beside the first.
  ChoiceKey other = kH100;
  other.shapes = "f32 x[256, 64, 28, 28] w[64, 64, 3, 3] stride 1 1 padding 1 1";
  StubTimer timer;
  timer.ms["0"] = 3;
  EXPECT_EQ(later.choose(other, kAlgorithms, true, timer.fn()).variant, "0");
  EXPECT_EQ(KernelChoices(path).remembered().size(), 2u);
  // A file that is not one: a clear error naming it and the fix.
  std::ofstream(path) << "{\"format\": \"something else\", \"choices\": []}";
  std::string message = errorOf([&] { KernelChoices bad(path); });
  EXPECT_NE(message.find("kernel choices file " + path + " is not one spmd wrote"), std::string::npos) << message;
  EXPECT_NE(message.find("delete it (its choices are timed again), or point SPMD_KERNEL_CACHE at another directory"), std::string::npos) << message;
  std::ofstream(path) << "not json";
  EXPECT_NE(errorOf([&] { KernelChoices bad(path); }).find("is not JSON"), std::string::npos);
}

// Stands for the job's broadcast: process 0's text reaches the others.
struct FakeJob {
  std::string broadcast;
  struct Process final : ChoiceExchange {
    FakeJob* job;
    int r;
    Process(FakeJob* j, int rank) : job(j), r(rank) {}
    int rank() const override { return r; }
    std::string fromProcessZero(const std::string& text) override {
      if (r == 0) job->broadcast = text;
      return job->broadcast;
    }
  };
};

TEST(KernelChoiceTest, ProcessZerosChoiceIsTakenByEveryProcess) {
  FakeJob job;
  FakeJob::Process zero(&job, 0), one(&job, 1);
  KernelChoices onZero, onOne;
  StubTimer timer;
  Choice c0 = onZero.choose(kH100, kAlgorithms, true, timer.fn(), &zero);
  EXPECT_EQ(c0.variant, "6");
  const std::string what = kH100.library + " | " + kH100.op + " | " + kH100.shapes;
  EXPECT_EQ(job.broadcast, what + "\n" + kH100.device + "\n6");
  // Process 1 would time "0" faster on its own clock; it takes process 0's choice untimed.
  Choice c1 = onOne.choose(kH100, kAlgorithms, true, noTiming(), &one);
  EXPECT_EQ(c1.variant, "6");
  EXPECT_EQ(c1.from, Choice::From::ProcessZero);
  // Each key is exchanged once per process: another replica of either process meets it again
  // without a broadcast (which the other process would not match).
  job.broadcast = "(not sent again)";
  EXPECT_EQ(onZero.choose(kH100, kAlgorithms, true, noTiming(), &zero).variant, "6");
  EXPECT_EQ(onOne.choose(kH100, kAlgorithms, true, noTiming(), &one).variant, "6");
  EXPECT_EQ(job.broadcast, "(not sent again)");
  // Process 0 choosing for another step than this process: a clear error, not a wrong kernel.
  job.broadcast = kH100.library + " | conv2d_backward_data | " + kH100.shapes + "\n" + kH100.device + "\n6";
  EXPECT_NE(errorOf([&] { KernelChoices fresh; fresh.choose(kH100, kAlgorithms, true, noTiming(), &one); })
                .find("the processes run different programs"),
            std::string::npos);
  // A choice process 1 does not offer (other library versions): refused, saying why.
  job.broadcast = what + "\n" + kH100.device + "\n7";
  std::string message = errorOf([&] { KernelChoices fresh; fresh.choose(kH100, kAlgorithms, true, noTiming(), &one); });
  EXPECT_NE(message.find("process 0 chose variant '7'"), std::string::npos) << message;
  EXPECT_EQ(exchangeOf(Job::single()), nullptr) << "a job of one process needs no exchange";
}

TEST(KernelChoiceTest, AChoiceMadeOnAnotherGpuKindIsRefusedWithAMessage) {
  const std::string path = tempFile("h100.json");
  StubTimer timer;
  KernelChoices(path).choose(kH100, kAlgorithms, true, timer.fn());
  ChoiceKey h200 = kH100;
  h200.device = "NVIDIA H200 (sm_90)";
  KernelChoices onH200(path);
  StubTimer again;
  Choice c = onH200.choose(h200, kAlgorithms, true, again.fn());
  EXPECT_EQ(c.from, Choice::From::Timed) << "the H100's choice is not used on an H200";
  EXPECT_FALSE(again.asked.empty());
  EXPECT_NE(c.why.find("was made on NVIDIA H100 80GB HBM3 (sm_90), not on NVIDIA H200 (sm_90), so it is not used"),
            std::string::npos)
      << c.why;
  // In a job, a process on another kind than process 0's is refused, naming both.
  FakeJob job;
  job.broadcast = kH100.library + " | " + kH100.op + " | " + kH100.shapes + "\n" + kH100.device + "\n6";
  FakeJob::Process one(&job, 1);
  std::string message = errorOf([&] { KernelChoices k; k.choose(h200, kAlgorithms, true, noTiming(), &one); });
  EXPECT_NE(message.find("process 0 chose the kernel of conv2d_forward"), std::string::npos) << message;
  EXPECT_NE(message.find("on NVIDIA H100 80GB HBM3 (sm_90), but this process runs NVIDIA H200 (sm_90)"),
            std::string::npos)
      << message;
}

TEST(KernelChoiceTest, APinnedVariantWinsAndABadPinIsRefusedListingTheVariants) {
  KernelChoices pinned;
  pinned.pin("conv2d_forward:0,conv2d_backward_data:3");
  Choice c = pinned.choose(kH100, kAlgorithms, true, noTiming());
  EXPECT_EQ(c.variant, "0");
  EXPECT_EQ(c.from, Choice::From::Pinned);
  KernelChoices unknown;
  unknown.pin("conv2d_forward:winograd");
  EXPECT_EQ(errorOf([&] { unknown.choose(kH100, kAlgorithms, true, noTiming()); }),
            "SPMD_KERNELS pins conv2d_forward to 'winograd', which is not a variant of conv2d_forward (" + kH100.shapes +
                ") on " + kH100.device + "; its variants: 0, 1, 2, 6");
  KernelChoices nondeterministic;
  nondeterministic.pin("conv2d_forward:1");
  EXPECT_NE(errorOf([&] { nondeterministic.choose(kH100, kAlgorithms, true, noTiming()); })
                .find("which may not run: its bits differ between runs (nondeterministic); the allowed variants"),
            std::string::npos);
  KernelChoices malformed;
  EXPECT_NE(errorOf([&] { malformed.pin("conv2d_forward"); }).find("'conv2d_forward' is not op:variant"),
            std::string::npos);
  // Two variants for one op: refused rather than the last taken; the same pin twice is one pin.
  KernelChoices twice;
  EXPECT_NE(errorOf([&] { twice.pin("conv2d_forward:0,conv2d_backward_data:3,conv2d_forward:2"); })
                .find("SPMD_KERNELS pins conv2d_forward twice, to '0' and to '2'; give each op one variant"),
            std::string::npos);
  KernelChoices again;
  again.pin("conv2d_forward:0,conv2d_forward:0");
  EXPECT_EQ(again.pins(), "conv2d_forward:0");
  // A backend with a fixed list names all its variants: a pin to one that does not run on this
  // step is passed over (the step is timed), one it does not have is refused listing the list.
  KernelChoices listed;
  listed.pin("conv2d_forward:winograd");
  const std::vector<std::string> all = {"winograd", "0", "1", "2", "6"};
  StubTimer timer;
  c = listed.choose(kH100, kAlgorithms, true, timer.fn(), nullptr, all);
  EXPECT_EQ(c.variant, "6");
  EXPECT_NE(c.why.find("the pinned winograd does not run on this step"), std::string::npos) << c.why;
  listed.setPins("conv2d_forward:direct");
  EXPECT_NE(errorOf([&] { listed.choose(kH100, kAlgorithms, true, noTiming(), nullptr, all); })
                .find("its variants: winograd, 0, 1, 2, 6"),
            std::string::npos);
  EXPECT_EQ(listed.pins(), "conv2d_forward:direct");
}

// Processes sharing the choices file: one that meets a key another process timed since it read
// the file takes that choice without timing (it reads the file again under its lock), so every
// run on the machine after the first runs the same kernels.
TEST(KernelChoiceTest, AChoiceAnotherProcessWroteMeanwhileIsTakenWithoutTiming) {
  const std::string path = tempFile("shared.json");
  KernelChoices first(path), second(path);  // both read the file before either chose
  StubTimer timer;
  EXPECT_EQ(first.choose(kH100, kAlgorithms, true, timer.fn()).variant, "6");
  Choice c = second.choose(kH100, kAlgorithms, true, noTiming());
  EXPECT_EQ(c.variant, "6");
  EXPECT_EQ(c.from, Choice::From::Remembered);
  // And a third key chosen by `second` keeps `first`'s in the file.
  ChoiceKey other = kH100;
  other.shapes += " (another)";
  second.choose(other, kAlgorithms, true, StubTimer().fn());
  EXPECT_EQ(KernelChoices(path).remembered().size(), 2u);
  // `first` wrote the file last before that, and skips parsing it while it is the file it wrote
  // (runtime/device/KernelChoice.cpp): `second`'s write replaced it, so `first` reads it again.
  Choice again = first.choose(other, kAlgorithms, true, noTiming());
  EXPECT_EQ(again.from, Choice::From::Remembered);
  EXPECT_EQ(again.variant, "6");
}

// Timing while other processes keep the cores busy (runtime/base/MachineLoad.h, here a stubbed
// /proc): the choice is still made and kept (the first run on a machine decides for later ones,
// so that runs agree), but its note says so and a warning, once, names the file to delete.
TEST(KernelChoiceTest, AChoiceTimedWhileOtherProcessesKeepTheCoresBusySaysSo) {
  const int cores = onlineCores();
  // 10 ticks of wall time a timing; this process keeps one core busy, others `others` cores.
  double others = cores - 0.5;  // with ours, more than the machine has: contended
  CpuTicks now{0, 0, 0, true};
  setCpuTicksSource([&] {
    CpuTicks t = now;
    now.total += 10.0 * cores, now.self += 10, now.busy += 10 * (1 + others);
    return t;
  });
  const std::string path = tempFile("busy.json");
  KernelChoices choices(path);
  ::testing::internal::CaptureStderr();
  Choice c = choices.choose(kH100, kAlgorithms, true, StubTimer().fn());
  ChoiceKey other = kH100;
  other.shapes += " (another)";
  Choice second = choices.choose(other, kAlgorithms, true, StubTimer().fn());
  others = 0;  // a quiet machine
  ChoiceKey third = kH100;
  third.shapes += " (a third)";
  Choice quiet = choices.choose(third, kAlgorithms, true, StubTimer().fn());
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  setCpuTicksSource(nullptr);
  char busy[64];
  std::snprintf(busy, sizeof busy, "timed while other processes kept %.1f of the %d cores busy", cores - 0.5, cores);
  EXPECT_EQ(c.variant, "6");
  EXPECT_NE(c.why.find(busy), std::string::npos) << c.why;
  EXPECT_NE(second.why.find(busy), std::string::npos) << second.why;
  EXPECT_EQ(quiet.why.find("timed while"), std::string::npos) << quiet.why;
  EXPECT_NE(warnings.find("spmd: warning: kernel variants were timed while other processes kept"), std::string::npos)
      << warnings;
  EXPECT_NE(warnings.find("to time them again, delete " + path), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("spmd: warning"), warnings.rfind("spmd: warning")) << "warned more than once: " << warnings;
  EXPECT_EQ(KernelChoices(path).remembered().size(), 3u);  // kept all the same
  // Too short a stretch (under 5 ticks) or an unreadable /proc says nothing.
  EXPECT_FALSE(loadBetween({0, 0, 0, true}, {8, 4.0 * cores, 4, true}, cores).known);
  EXPECT_FALSE(loadBetween({0, 0, 0, false}, {80, 40.0 * cores, 40, true}, cores).known);
  // Others busy on cores this process leaves idle take nothing from it.
  EXPECT_FALSE(loadBetween({0, 0, 0, true}, {20, 10.0 * 16, 10, true}, 16).contended());
}

}  // namespace
}  // namespace spmd::runtime
