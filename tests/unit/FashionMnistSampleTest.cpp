// The Fashion-MNIST sample as a user runs it (the built binary, on cpu:2, a reduced-width model
// and a few hundred images): the loss falls; stopping and resuming gives bit-identical
// parameters, BN statistics and optimizer state to an uninterrupted run; a corrupt checkpoint or
// data file is a clear error that leaves the previous checkpoint untouched; bad flags are errors.
#include <regex>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/data/FashionMnist.h"
#include "TestUtil.h"
#include "frontend/io/Safetensors.h"

namespace spmd {
namespace {

namespace fs = std::filesystem;

using spmd::testing::CommandRun;
using spmd::testing::runCommand;
using SampleRun = CommandRun;

SampleRun runSample(const std::string& flags) {
  return runCommand(std::string(SPMD_SAMPLE_PATH) + " " + flags);
}

std::string readBytes(const fs::path& path) { return spmd::testing::readBytes(path.string()); }

class FashionMnistSampleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(data::defaultFashionMnistDir()) / "train-images-idx3-ubyte.gz"))
      GTEST_SKIP() << "Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)";
    root = fs::temp_directory_path() / ("spmd-sample-" + std::to_string(::getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  void TearDown() override { fs::remove_all(root); }

  // 384 training images, batch 32: 12 steps per epoch on 2 devices of 16.
  std::string small(const fs::path& out) const {
    return "--devices cpu:2 --width 4 --train-limit 384 --test-limit 200 --batch 32 --lr 0.05 "
           "--epochs 2 --no-plot --out " + out.string();
  }

  fs::path root;
};

TEST_F(FashionMnistSampleTest, TrainsOnTwoDevicesAndTheLossFalls) {
  SampleRun run = runSample(small(root / "a") + " --epochs 3");
  ASSERT_EQ(run.status, 0) << run.output;
  std::ifstream csv(root / "a" / "metrics.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "epoch,train_loss,train_accuracy,test_loss,test_accuracy,seconds,images_per_second,data_wait_seconds");
  std::vector<double> losses;
  while (std::getline(csv, line)) {
    std::stringstream row(line);
    std::string epoch, loss;
    std::getline(row, epoch, ',');
    std::getline(row, loss, ',');
    losses.push_back(std::stod(loss));
  }
  ASSERT_EQ(losses.size(), 3u) << run.output;
  std::printf("  train loss per epoch: %.4f %.4f %.4f\n", losses[0], losses[1], losses[2]);
  EXPECT_LT(losses[2], 0.85 * losses[0]) << run.output;
  EXPECT_NE(run.output.find("global batch 32 (16 rows per device)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("epoch 3/3: 384 images, train loss"), std::string::npos) << run.output;
}

// A batch that does not split over the devices, and an epoch that does not split into batches:
// 100 images at batch 33 on cpu:2 are 3 batches of 33 dealt 17 + 16 (one padding row) and a
// last one of 1 image (the second device holding padding alone); every image is seen once.
TEST_F(FashionMnistSampleTest, EveryImageIsSeenWhenBatchesSplitUnevenly) {
  SampleRun run = runSample("--devices cpu:2 --width 4 --batch 33 --train-limit 100 --test-limit 10 --epochs 1 "
                            "--no-plot --out " + (root / "x").string());
  ASSERT_EQ(run.status, 0) << run.output;
  for (const char* line : {"global batch 33 (17 rows per device, 1 of them padding, masked)",
                           "every epoch sees all 100 training images: its last batch has 1, padded and masked",
                           "epoch 1/1 step 4/4", "epoch 1/1: 100 images, train loss"})
    EXPECT_NE(run.output.find(line), std::string::npos) << line << "\n" << run.output;
}

// samples/resnet18_fashion_mnist/eval_torch.py loads the checkpoint by name into the PyTorch
// model and must reach the accuracy the sample reported on the same test images.
TEST_F(FashionMnistSampleTest, CheckpointLoadsIntoPyTorchWithTheSameAccuracy) {
  const char* env = std::getenv("SPMD_PYTHON");
  std::string python = env ? env : "/usr/bin/python3";
  if (std::system((python + " -c 'import torch' > /dev/null 2>&1").c_str()) != 0)
    GTEST_FAIL() << "PyTorch is not importable by " << python << " (apt-get install python3-torch; scripts/setup.sh "
                    "installs it, so a failed import is a broken setup, not a reason to skip)";
  SampleRun run = runSample(small(root / "t") + " --epochs 1");
  ASSERT_EQ(run.status, 0) << run.output;
  std::ifstream csv(root / "t" / "metrics.csv");
  std::string line, field;
  std::getline(csv, line);
  std::getline(csv, line);
  std::stringstream row(line);
  std::vector<std::string> fields;
  while (std::getline(row, field, ',')) fields.push_back(field);
  ASSERT_GE(fields.size(), 5u) << line;
  double oursLoss = std::stod(fields[3]), ours = 100 * std::stod(fields[4]);
  SampleRun torch = runCommand(python + " " SPMD_SOURCE_DIR "/samples/resnet18_fashion_mnist/eval_torch.py " +
                               (root / "t" / "checkpoint.safetensors").string() + " --limit 200");
  const std::string& output = torch.output;
  ASSERT_EQ(torch.status, 0) << output;
  size_t at = output.find("PyTorch test accuracy: ");
  ASSERT_NE(at, std::string::npos) << output;
  double theirs = std::stod(output.substr(at + 23));
  size_t lossAt = output.find("PyTorch test loss: ");
  ASSERT_NE(lossAt, std::string::npos) << output;
  double theirsLoss = std::stod(output.substr(lossAt + 19));
  std::printf("  200 test images: spmd accuracy %.2f%% loss %.6f; the same checkpoint in PyTorch "
              "%.2f%% loss %.6f\n", ours, oursLoss, theirs, theirsLoss);
  EXPECT_LE(std::abs(ours - theirs), 0.5 + 1e-9) << "more than one image of 200 differs\n" << output;
  EXPECT_LE(std::abs(oursLoss - theirsLoss), 1e-4 * std::abs(theirsLoss)) << output;
}

TEST_F(FashionMnistSampleTest, ResumingGivesBitIdenticalResults) {
  SampleRun straight = runSample(small(root / "straight"));
  ASSERT_EQ(straight.status, 0) << straight.output;
  // Stop in the middle of epoch 1 (step 7 of 12), then resume to the end of epoch 2.
  SampleRun first = runSample(small(root / "resumed") + " --max-steps 7");
  ASSERT_EQ(first.status, 0) << first.output;
  EXPECT_NE(first.output.find("stopped after 7 steps (--max-steps)"), std::string::npos) << first.output;
  SampleRun second = runSample(small(root / "resumed") + " --resume " + (root / "resumed").string());
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("at epoch 1, batch 7 (step 7)"), std::string::npos) << second.output;
  // The kernels timed by the first run ran again (the checkpoint keeps its choices).
  EXPECT_NE(second.output.find("timed kernel choices are taken"), std::string::npos) << second.output;
  EXPECT_EQ(second.output.find("kernels differ"), std::string::npos) << second.output;

  io::Checkpoint a = io::loadSafetensors((root / "straight" / "checkpoint.safetensors").string());
  io::Checkpoint b = io::loadSafetensors((root / "resumed" / "checkpoint.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  int compared = 0;
  for (const auto& [name, x] : a.tensors) {
    const Array& y = b.tensors.at(name);
    ASSERT_EQ(x.bytes(), y.bytes()) << name;
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.bytes()), 0) << name << " differs after resuming";
    ++compared;
  }
  EXPECT_GT(compared, 100);  // params, BN state and momentum
  EXPECT_EQ(a.metadata.at("step"), "24");
  EXPECT_EQ(b.metadata.at("step"), "24");

  // A checkpoint whose kernels were chosen on another machine kind: the resume says its kernels
  // differ, naming both kinds, and continues.
  SampleRun moved = runSample(small(root / "moved") + " --max-steps 7");
  ASSERT_EQ(moved.status, 0) << moved.output;
  const std::string path = (root / "moved" / "checkpoint.safetensors").string();
  io::Checkpoint c = io::loadSafetensors(path);
  ASSERT_NE(c.metadata.at("kernel_choices").find("winograd"), std::string::npos) << c.metadata.at("kernel_choices");
  c.metadata["kernel_choices"] =
      std::regex_replace(c.metadata.at("kernel_choices"), std::regex("\"device\":\"[^\"]*\""), "\"device\":\"Another CPU\"");
  io::saveSafetensors(path, c);
  SampleRun elsewhere = runSample(small(root / "moved") + " --resume " + (root / "moved").string());
  EXPECT_EQ(elsewhere.status, 0) << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("warning: this run's kernels differ from the checkpoint's run ("), std::string::npos)
      << elsewhere.output;
  EXPECT_NE(elsewhere.output.find("the checkpoint's run chose it on Another CPU, this one runs "), std::string::npos)
      << elsewhere.output;

  // Resuming a finished run with the same --epochs has nothing to do, and says so.
  SampleRun finished = runSample(small(root / "straight") + " --resume " + (root / "straight").string());
  EXPECT_EQ(finished.status, 0) << finished.output;
  EXPECT_NE(finished.output.find("the checkpoint has already trained 2 epochs, which --epochs 2 does "
                                 "not exceed: nothing to do"),
            std::string::npos) << finished.output;
  // Resumed on another backend and precision: named, and no bit-for-bit promise.
  SampleRun other = runSample(small(root / "straight") + " --epochs 3 --max-steps 1 --devices sim:2 --precision bf16" +
                              " --resume " + (root / "straight").string());
  EXPECT_EQ(other.status, 0) << other.output;
  EXPECT_NE(other.output.find("warning: this run differs from the checkpoint's in what sets its bits (backend cpu -> "
                              "sim, precision f32 -> bf16): training continues, but not bit for bit"),
            std::string::npos)
      << other.output;
  EXPECT_EQ(other.output.find("bit for bit ("), std::string::npos) << "sim has no threads to compare:\n" << other.output;
}

// --clip-norm, --no-decay-norm-bias and --ema: the EMA rides in the checkpoint's optimizer
// state, so stopping and resuming still gives the same bits; the flags are part of the run's
// identity (resuming without --ema is refused, naming it), and evaluation reads the EMA.
TEST_F(FashionMnistSampleTest, ClipGroupsAndEmaResumeBitForBit) {
  const std::string extra = " --clip-norm 0.5 --no-decay-norm-bias --ema 0.9";
  SampleRun straight = runSample(small(root / "straight") + extra);
  ASSERT_EQ(straight.status, 0) << straight.output;
  EXPECT_NE(straight.output.find("gradients clipped to global norm 0.5"), std::string::npos) << straight.output;
  EXPECT_NE(straight.output.find("evaluating an EMA of the parameters and BatchNorm statistics, decay 0.9"), std::string::npos);
  SampleRun first = runSample(small(root / "resumed") + extra + " --max-steps 7");
  ASSERT_EQ(first.status, 0) << first.output;
  SampleRun refused = runSample(small(root / "resumed") + " --resume " + (root / "resumed").string());
  EXPECT_EQ(refused.status, 1) << refused.output;
  EXPECT_NE(refused.output.find("was trained with --clip_norm 0.5 but this run has 0"), std::string::npos)
      << refused.output;
  SampleRun second = runSample(small(root / "resumed") + extra + " --resume " + (root / "resumed").string());
  ASSERT_EQ(second.status, 0) << second.output;

  io::Checkpoint a = io::loadSafetensors((root / "straight" / "checkpoint.safetensors").string());
  io::Checkpoint b = io::loadSafetensors((root / "resumed" / "checkpoint.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, x] : a.tensors)
    EXPECT_EQ(std::memcmp(x.data(), b.tensors.at(name).data(), x.bytes()), 0) << name << " differs after resuming";
  const Array& count = a.tensors.at("opt.ema.ema_updates");
  EXPECT_EQ(count.values<float>()[0], 24.0f);
  // The average is not the parameters (a check on a copy would pass any EMA).
  const Array &p = a.tensors.at("params.fc.weight"), &e = a.tensors.at("opt.ema.fc.weight");
  EXPECT_NE(std::memcmp(p.data(), e.data(), p.bytes()), 0);
  // The BatchNorm statistics are averaged too (AveragedModel's use_buffers=True).
  ASSERT_TRUE(a.tensors.count("opt.ema.buffers.stem.bn.running_mean"));
  const Array &m = a.tensors.at("state.stem.bn.running_mean"), &em = a.tensors.at("opt.ema.buffers.stem.bn.running_mean");
  EXPECT_NE(std::memcmp(m.data(), em.data(), m.bytes()), 0);
}

TEST_F(FashionMnistSampleTest, CorruptCheckpointOrDataIsAClearErrorAndKeepsThePreviousCheckpoint) {
  fs::path out = root / "run";
  ASSERT_EQ(runSample(small(out) + " --epochs 1").status, 0);
  fs::path checkpoint = out / "checkpoint.safetensors";
  const std::string before = readBytes(checkpoint);

  // A truncated copy of the checkpoint.
  fs::path cut = root / "cut.safetensors";
  std::ofstream(cut, std::ios::binary) << before.substr(0, before.size() / 2);
  SampleRun bad = runSample(small(out) + " --resume " + cut.string());
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("resnet18_fashion_mnist: error: " + cut.string() +
                            ": not a valid safetensors checkpoint: tensor '"),
            std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("(truncated file?)"), std::string::npos) << bad.output;

  // A truncated training-images file, resuming the good checkpoint into the same --out.
  fs::path data = root / "data";
  fs::create_directories(data);
  for (const char* name : {"train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    fs::copy_file(fs::path(data::defaultFashionMnistDir()) / name, data / name);
  std::string images = readBytes(fs::path(data::defaultFashionMnistDir()) / "train-images-idx3-ubyte.gz");
  std::ofstream(data / "train-images-idx3-ubyte.gz", std::ios::binary) << images.substr(0, 20000);
  SampleRun corrupt = runSample(small(out) + " --resume " + out.string() + " --data-dir " + data.string());
  EXPECT_EQ(corrupt.status, 1);
  EXPECT_NE(corrupt.output.find((data / "train-images-idx3-ubyte.gz").string() + ": truncated or corrupt"),
            std::string::npos) << corrupt.output;

  EXPECT_EQ(readBytes(checkpoint), before) << "a failed run must leave the previous checkpoint intact";
  // And the intact checkpoint still resumes.
  SampleRun again = runSample(small(out) + " --resume " + out.string());
  EXPECT_EQ(again.status, 0) << again.output;
}

// The flags go through CLI11 (tools/cli): every bad command line names the flag and what it
// accepts, exits 2, and points at --help; --help and --version come from CLI11 too.
TEST_F(FashionMnistSampleTest, BadFlagsAreClearErrors) {
  auto message = [&](const std::string& flags) {
    SampleRun run = runSample(flags);
    EXPECT_EQ(run.status, 2) << flags << ": " << run.output;
    return run.output;
  };
  const std::string error = "resnet18_fashion_mnist: error: ", seeHelp = " (see --help)\n";
  EXPECT_EQ(message("--batch 0"), error + "--batch is 0, out of range: give a whole number from 1 to 1073741824" + seeHelp);
  EXPECT_EQ(message("--batch=99999999999999"),
            error + "--batch is 99999999999999, out of range: give a whole number from 1 to 1073741824" + seeHelp);
  EXPECT_EQ(message("--epochs 99999999999999999999"),
            error + "--epochs is 99999999999999999999, out of range: give a whole number from 1 to 1000000" + seeHelp);
  EXPECT_EQ(message("--seed 010x"), error + "--seed needs a whole number from 0 to 9223372036854775807, got '010x'" + seeHelp);
  EXPECT_EQ(message("--lr 1e999"), error + "--lr is 1e999, out of range: give a number from 0 to 1e+30" + seeHelp);
  EXPECT_EQ(message("--optimizer rmsprop"), error + "--optimizer must be one of sgd|adam, got 'rmsprop'" + seeHelp);
  EXPECT_EQ(message("--epoch 3"), error + "unknown flag '--epoch'" + seeHelp);
  EXPECT_EQ(message("--lr"), error + "--lr needs a value" + seeHelp);
  EXPECT_EQ(message("--lr inf"), error + "--lr is inf, out of range: give a number from 0 to 1e+30" + seeHelp);
  EXPECT_EQ(message("--momentum nan"), error + "--momentum needs a number from 0 to 1, got 'nan'" + seeHelp);
  SampleRun help = runSample("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("Usage: resnet18_fashion_mnist [OPTIONS]"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("--batch N=128"), std::string::npos) << help.output;
  SampleRun version = runSample("--version");
  EXPECT_EQ(version.status, 0);
  EXPECT_EQ(version.output.rfind("resnet18_fashion_mnist (spmd ", 0), 0u) << version.output;
}

// Settings from the environment are read and checked before the first step: a junk switch or an
// unwritable trace path stops the run at once, naming it, with no checkpoint written (before,
// SPMD_LOG_DRIFT_CHECKS was read at the first checkpoint, after a whole epoch, and SPMD_TRACE's
// file at exit, after the whole run).
TEST_F(FashionMnistSampleTest, EnvironmentSettingsAreCheckedBeforeTheFirstStep) {
  for (auto [name, value, expected] :
       {std::tuple{"SPMD_LOG_DRIFT_CHECKS", "maybe", "SPMD_LOG_DRIFT_CHECKS"},
        {"SPMD_MAX_CPU_ISA", "avx3", "SPMD_MAX_CPU_ISA='avx3' is not an instruction set of spmd's own CPU kernels"},
        {"SPMD_TRACE", "/nonexistent-spmd-dir/trace.json",
         "the trace file /nonexistent-spmd-dir/trace.json (SPMD_TRACE, PmapOptions::trace, --trace) cannot be written"}}) {
    setenv(name, value, 1);
    SampleRun run = runSample(small(root / name) + " --epochs 1");
    unsetenv(name);
    EXPECT_NE(run.status, 0) << name << ": " << run.output;
    EXPECT_NE(run.output.find(expected), std::string::npos) << run.output;
    EXPECT_EQ(run.output.find("epoch 1"), std::string::npos) << "it trained first:\n" << run.output;
    EXPECT_FALSE(fs::exists(root / name / "checkpoint.safetensors"));
  }
}

// --out is checked and locked before any training: a file, an unwritable place, or a directory
// another run holds are clear errors at once; a hostile directory name is only ever a path.
TEST_F(FashionMnistSampleTest, OutDirectoryIsCheckedAndLockedBeforeTraining) {
  std::ofstream(root / "file") << "x";
  SampleRun file = runSample(small(root / "file"));
  EXPECT_EQ(file.status, 1);
  EXPECT_NE(file.output.find("--out " + (root / "file").string() + " is a file, not a directory"), std::string::npos)
      << file.output;
  SampleRun proc = runSample(small("/proc/spmd-cannot-exist"));
  EXPECT_EQ(proc.status, 1);
  EXPECT_NE(proc.output.find("--out /proc/spmd-cannot-exist: cannot create the directory"), std::string::npos)
      << proc.output;
  // Another run holds the directory: this test takes the same flock a live run holds.
  fs::create_directories(root / "busy");
  int lock = ::open((root / "busy" / ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX | LOCK_NB), 0);
  SampleRun holder = runSample(small(root / "busy"));
  ::close(lock);
  EXPECT_EQ(holder.status, 1) << holder.output;
  EXPECT_NE(holder.output.find("is in use by another training run"), std::string::npos) << holder.output;
  EXPECT_FALSE(fs::exists(root / "busy" / "metrics.csv")) << "nothing was trained or written";
  // A too-large --eval-batch for memory fails before training, not after an epoch.
  SampleRun big = runCommand("SPMD_HOST_MEMORY_BYTES=300000000 " + std::string(SPMD_SAMPLE_PATH) + " " +
                             small(root / "big") + " --test-limit 10000 --eval-batch 10000");
  EXPECT_EQ(big.status, 1) << big.output;
  EXPECT_NE(big.output.find("program @eval_step on cpu:2"), std::string::npos) << big.output;
  EXPECT_EQ(big.output.find("epoch 1/2"), std::string::npos) << "failed before training: " << big.output;
}

TEST_F(FashionMnistSampleTest, QuotesInTheOutPathStillPlotAndNeverRunAnything) {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) GTEST_SKIP() << "gnuplot not installed";
  fs::path odd = root / "it's a \"run\"; touch pwned; '";
  // Pass the path through the environment so the test's own shell never interprets it.
  setenv("SPMD_TEST_OUT", odd.c_str(), 1);
  SampleRun run = runCommand(std::string(SPMD_SAMPLE_PATH) + " --devices cpu:2 --width 4 --train-limit 128 "
                             "--test-limit 64 --batch 32 --epochs 1 --out \"$SPMD_TEST_OUT\"");
  unsetenv("SPMD_TEST_OUT");
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(run.output.find("no plot"), std::string::npos) << run.output;
  EXPECT_TRUE(fs::exists(odd / "metrics.png")) << run.output;
  EXPECT_FALSE(fs::exists("pwned"));
  EXPECT_FALSE(fs::exists(odd / "pwned"));
}

// A diverging run stops with a clear error at the first non-finite loss and never writes a
// checkpoint of NaNs over the last good one.
TEST_F(FashionMnistSampleTest, NonFiniteLossStopsTheRunAndKeepsTheGoodCheckpoint) {
  SampleRun good = runSample(small(root / "d") + " --epochs 1");
  ASSERT_EQ(good.status, 0) << good.output;
  std::string before = readBytes(root / "d" / "checkpoint.safetensors");
  SampleRun diverged = runSample("--devices cpu:2 --width 4 --train-limit 384 --test-limit 200 --batch 32 "
                                 "--epochs 1 --no-plot --lr 1e10 --out " + (root / "e").string());
  EXPECT_EQ(diverged.status, 1) << diverged.output;
  EXPECT_NE(diverged.output.find("training diverged, so it stops here"), std::string::npos) << diverged.output;
  EXPECT_NE(diverged.output.find("SPMD_DEBUG_NANS=1"), std::string::npos) << diverged.output;
  EXPECT_FALSE(fs::exists(root / "e" / "checkpoint.safetensors")) << diverged.output;
  EXPECT_EQ(readBytes(root / "d" / "checkpoint.safetensors"), before);
}

}  // namespace
}  // namespace spmd
