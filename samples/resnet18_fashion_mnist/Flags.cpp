// parseFlags: one flag per branch, each value checked.
#include "Flags.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

namespace sample {
namespace {

const char* kUsage = R"(usage: resnet18_fashion_mnist [flags]
Trains ResNet-18 on Fashion-MNIST data-parallel (spmd::pmap) and evaluates it every epoch.

  --devices LIST      cpu:N emulated devices, sim:N simulated accelerators, cuda:0*N, ...
                      (default $SPMD_DEVICES, else cpu:2)
  --epochs N          epochs to train (default 3)
  --batch N           global batch, split over the devices (default 128)
  --lr X              learning rate (default 0.05)
  --momentum X        SGD momentum (default 0.9)
  --weight-decay X    L2 weight decay (default 5e-4)
  --optimizer NAME    sgd or adam (default sgd)
  --bn MODE           replica: BatchNorm statistics per device (default, as DDP);
                      cross: over all devices (SyncBatchNorm)
  --layouts MODE      backend: blocked layouts where the backend's kernels read them (default);
                      plain: every tensor plain NCHW (to compare speed or numerics)
  --width N           channels of the first stage; 64 is the seeds' full model (default 16)
  --train-limit N     use the first N training images (default 0: all 60,000)
  --test-limit N      use the first N test images (default 0: all 10,000)
  --eval-batch N      test batch (default 500)
  --seed N            initialization and shuffling seed (default 0)
  --out DIR           metrics.csv, metrics.png, checkpoint.safetensors (default runs/fashion_mnist)
  --resume PATH       continue from a checkpoint file or an --out directory
  --max-steps N       stop after N steps in all, writing a checkpoint (default 0: no limit)
  --data-dir DIR      the Fashion-MNIST *-ubyte.gz files (default $SPMD_FASHION_MNIST_DIR,
                      else /usr/share/datasets/fashion-mnist)
  --no-plot           do not draw metrics.png
  --accumulate A      run each device's share of the batch as A micro-batches (a power of two) and
                      update once: the same bits as A times the devices (per-replica BatchNorm)
  --threads-per-replica N
                      OpenMP threads each device's kernels use (default: SPMD_THREADS_PER_REPLICA,
                      else the host's cores divided among every device of every process on it);
                      a run's bits depend on the device count and this number
  --help              this text
The last incomplete training batch of each epoch is dropped (every step has one shape).
)";

// Numbers through the one parser of flags and environment variables (runtime/base/Parse.h).
int64_t integer(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  return spmd::runtime::parseWhole(text, flag, min, max);
}

double real(const std::string& flag, const std::string& text, double min, double max) {
  return spmd::runtime::parseNumber(text, flag, min, max);
}

std::string oneOf(const std::string& flag, const std::string& text, const char* a, const char* b) {
  if (text != a && text != b)
    throw spmd::Error(flag + " must be " + a + " or " + b + ", got '" + text + "'");
  return text;
}

}  // namespace

Flags parseFlags(int argc, char** argv) {
  Flags f;
  using Setter = std::function<void(const std::string&)>;
  const std::map<std::string, Setter> valued = {
      {"--devices", [&](const std::string& v) { f.devices = v; }},
      {"--epochs", [&](const std::string& v) { f.epochs = integer("--epochs", v, 1, 1000000); }},
      {"--batch", [&](const std::string& v) { f.batch = integer("--batch", v, 1, int64_t(1) << 30); }},
      {"--lr", [&](const std::string& v) { f.lr = real("--lr", v, 0, 1e30); }},
      {"--momentum", [&](const std::string& v) { f.momentum = real("--momentum", v, 0, 1); }},
      {"--weight-decay", [&](const std::string& v) { f.weightDecay = real("--weight-decay", v, 0, 1e30); }},
      {"--optimizer", [&](const std::string& v) { f.optimizer = oneOf("--optimizer", v, "sgd", "adam"); }},
      {"--bn", [&](const std::string& v) { f.bn = oneOf("--bn", v, "replica", "cross"); }},
      {"--layouts", [&](const std::string& v) { f.layouts = oneOf("--layouts", v, "backend", "plain"); }},
      {"--width", [&](const std::string& v) { f.width = integer("--width", v, 1, 4096); }},
      {"--train-limit", [&](const std::string& v) { f.trainLimit = integer("--train-limit", v, 0, int64_t(1) << 40); }},
      {"--test-limit", [&](const std::string& v) { f.testLimit = integer("--test-limit", v, 0, int64_t(1) << 40); }},
      {"--eval-batch", [&](const std::string& v) { f.evalBatch = integer("--eval-batch", v, 1, int64_t(1) << 30); }},
      {"--seed", [&](const std::string& v) { f.seed = static_cast<uint64_t>(integer("--seed", v, 0, INT64_MAX)); }},
      {"--out", [&](const std::string& v) { f.out = v; }},
      {"--resume", [&](const std::string& v) { f.resume = v; }},
      {"--accumulate", [&](const std::string& v) { f.accumulate = integer("--accumulate", v, 1, 4096); }},
      {"--threads-per-replica", [&](const std::string& v) { f.threadsPerReplica = integer("--threads-per-replica", v, 1, 4096); }},
      {"--max-steps", [&](const std::string& v) { f.maxSteps = integer("--max-steps", v, 0, INT64_MAX); }},
      {"--data-dir", [&](const std::string& v) { f.dataDir = v; }},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--no-plot") {
      f.plot = false;
      continue;
    }
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (valued.count(arg)) {
      if (i + 1 >= argc) throw spmd::Error(arg + " needs a value (see --help)");
      value = argv[++i];
    }
    auto it = valued.find(arg);
    if (it == valued.end()) throw spmd::Error("unknown flag '" + arg + "' (see --help)");
    it->second(value);
  }
  if (f.devices.empty()) {
    const char* env = std::getenv("SPMD_DEVICES");
    f.devices = env && *env ? env : "cpu:2";
  }
  return f;
}

}  // namespace sample
