// ResNet-18 forward on the CPU backend: builds the seeds' model in the DSL, traces and compiles
// it with spmd::jit, runs a batch of 28x28 images and prints the logits.
//   resnet18 [--batch N] [--width W] [--seed S] [--inference] [--dump-ir DIR]
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "frontend/spmd.h"
#include "frontend/models/ResNet.h"
#include "tools/cli/Cli.h"

namespace {

struct Flags {
  int64_t batch = 4, width = 64;
  uint64_t seed = 0;
  bool inference = false;
  std::string dumpDir;
};

// The flags through CLI11 (tools/cli); nullopt with `status` set when the program should stop.
std::optional<Flags> parse(int argc, char** argv, int& status) {
  Flags flags;
  spmd::cli::Flags app("resnet18", "Runs one ResNet-18 forward pass on the CPU (spmd::jit) and prints the logits.");
  app.whole("--batch", flags.batch, 1, int64_t(1) << 24, "images in the batch");
  app.whole("--width", flags.width, 1, 4096, "channels of the first stage (64: the seeds' model)");
  app.whole("--seed", flags.seed, uint64_t(INT64_MAX), "initialization and input seed");
  app.flag("--inference", flags.inference, "BatchNorm in inference form (default: training form)");
  app.text("--dump-ir", flags.dumpDir, "write the IR after each pass and the Program here", "DIR");
  if (auto stop = app.parse(argc, argv)) {
    status = *stop;
    return std::nullopt;
  }
  return flags;
}

}  // namespace

int main(int argc, char** argv) try {
  int status = 0;
  std::optional<Flags> parsed = parse(argc, argv, status);
  if (!parsed) return status;
  const Flags& flags = *parsed;
  auto model = spmd::models::resnet18({.inChannels = 1, .numClasses = 10, .width = flags.width, .bnAxisName = ""});
  auto [params, state] = model->initialize(flags.seed);
  std::printf("ResNet-18 (width %lld): %zu parameter tensors, %lld parameters\n",
              static_cast<long long>(flags.width), params.size(),
              static_cast<long long>(params.numElements()));

  auto forward = spmd::jit(
      [&](const spmd::Tree& p, const spmd::Tree& s, const spmd::Tensor& x) {
        return model->apply(p, s, x, /*training=*/!flags.inference).first;
      },
      {.name = "resnet18_forward", .dumpDir = flags.dumpDir});

  spmd::Rng rng(flags.seed + 1);
  spmd::Array images = spmd::init::normal(1.0)(rng, {flags.batch, 1, 28, 28});
  spmd::Tensor logits = forward(params, state, spmd::Tensor(images));

  std::printf("input %s -> logits %s (BatchNorm in %s mode)\n",
              spmd::Tensor(images).typeString().c_str(), logits.typeString().c_str(),
              flags.inference ? "inference" : "training");
  auto values = logits.array().values<float>();
  for (int64_t row = 0; row < logits.dim(0); ++row) {
    std::printf("  [%lld]", static_cast<long long>(row));
    for (int64_t c = 0; c < logits.dim(1); ++c)
      std::printf(" %+.5f", values[row * logits.dim(1) + c]);
    std::printf("\n");
  }
  if (!flags.dumpDir.empty())
    std::printf("IR after each pass and the Program: %s/\n", forward.lastDumpDir().c_str());
  return 0;
} catch (const spmd::Error& e) {
  std::fprintf(stderr, "resnet18: error: %s\n", e.what());
  return 1;
}
