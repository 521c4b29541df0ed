// Command-line flags of the Fashion-MNIST training sample, with defaults that train a width-16
// ResNet-18 to about 90% test accuracy in a few minutes on 2 CPU cores and 2 emulated devices.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sample {

struct Flags {
  std::string devices;          // --devices (default $SPMD_DEVICES, else cpu:2)
  int64_t epochs = 3;           // --epochs (the seeds' MAX_EPOCH)
  int64_t batch = 128;          // --batch: global batch, split over the devices
  double lr = 0.05;             // --lr
  double momentum = 0.9;        // --momentum (SGD)
  double weightDecay = 5e-4;    // --weight-decay
  std::string optimizer = "sgd";  // --optimizer sgd|adam
  std::string bn = "replica";   // --bn replica|cross
  std::string layouts = "backend";  // --layouts backend|plain
  int64_t width = 16;           // --width: channels of the first stage (64 = the seeds' model)
  int64_t trainLimit = 0;       // --train-limit (the seeds' DATASET_LIMIT); 0 = all 60,000
  int64_t testLimit = 0;        // --test-limit; 0 = all 10,000
  int64_t evalBatch = 500;      // --eval-batch
  uint64_t seed = 0;            // --seed
  std::string out = "runs/fashion_mnist";  // --out: metrics.csv, metrics.png, checkpoint.safetensors
  std::string resume;           // --resume: a checkpoint file (or an --out directory)
  int64_t maxSteps = 0;         // --max-steps: stop (with a checkpoint) after this many steps
  std::string dataDir;          // --data-dir (default /usr/share/datasets/fashion-mnist)
  bool plot = true;             // --no-plot
  bool trace = false;           // --trace: a Chrome trace of the run beside the metrics (trace.json)
  int64_t threadsPerReplica = 0;  // --threads-per-replica (0: SPMD_THREADS_PER_REPLICA, else the cores' share)
  int64_t accumulate = 1;       // --accumulate: micro-batches per device per step (gradient accumulation)
  double clipNorm = 0;          // --clip-norm: clip the gradients' global norm to this (0: off)
  bool noDecayNormBias = false; // --no-decay-norm-bias: no weight decay on BatchNorm parameters and biases
  std::string precision = "f32";  // --precision f32|bf16: bf16 is mixed precision (nn::ApplyOptions::compute)
  bool shardUpdate = false;     // --shard-update: ZeRO-1, each device updates 1/N of the parameters and state
  bool fsdp = false;            // --fsdp: FSDP, each parameter gathered right before each layer that reads it
  double ema = 0;               // --ema: decay of an EMA of the parameters, evaluated instead (0: off)
};

// Parses argv (tools/cli). nullopt when the program should stop with `exitStatus`: 0 after
// --help or --version, 2 after a bad flag (said on stderr, naming the flag and what it accepts).
std::optional<Flags> parseFlags(int argc, char** argv, int& exitStatus);

}  // namespace sample
