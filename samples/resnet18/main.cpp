// ResNet-18 forward on the CPU backend: builds the seeds' model in the DSL, traces and compiles
// it with spmd::jit, runs a batch of 28x28 images and prints the logits.
//   resnet18 [--batch N] [--width W] [--seed S] [--inference] [--dump-ir DIR]
#include <cstdio>
#include <cstring>
#include <string>

#include "frontend/spmd.h"
#include "frontend/models/ResNet.h"

namespace {

struct Flags {
  int64_t batch = 4, width = 64;
  uint64_t seed = 0;
  bool inference = false;
  std::string dumpDir;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "resnet18: %s\nusage: resnet18 [--batch N] [--width W] [--seed S] [--inference] "
               "[--dump-ir DIR]\n",
               problem.c_str());
  std::exit(2);
}

int64_t positive(const char* flag, const char* text) {
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (!*text || *end || value <= 0)
    usage(std::string(flag) + " needs a positive integer, got '" + text + "'");
  return value;
}

Flags parse(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--batch") flags.batch = positive("--batch", value());
    else if (arg == "--width") flags.width = positive("--width", value());
    else if (arg == "--seed") flags.seed = static_cast<uint64_t>(positive("--seed", value()));
    else if (arg == "--inference") flags.inference = true;
    else if (arg == "--dump-ir") flags.dumpDir = value();
    else if (arg == "--help" || arg == "-h") usage("runs one ResNet-18 forward pass");
    else usage("unknown flag '" + arg + "'");
  }
  return flags;
}

}  // namespace

int main(int argc, char** argv) try {
  Flags flags = parse(argc, argv);
  auto model = spmd::models::resnet18({.inChannels = 1, .numClasses = 10, .width = flags.width});
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
