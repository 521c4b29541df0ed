// parseFlags: every flag through CLI11 (tools/cli/Cli.h), each value checked.
#include "Flags.h"

#include <cstdio>
#include <cstdlib>

#include "tools/cli/Cli.h"

namespace sample {

std::optional<Flags> parseFlags(int argc, char** argv, int& exitStatus) {
  Flags f;
  spmd::cli::Flags app("resnet18_fashion_mnist",
                       "Trains ResNet-18 on Fashion-MNIST data-parallel (spmd::pmap) and evaluates it every epoch.");
  app.text("--devices", f.devices,
           "cpu:N emulated devices, sim:N simulated accelerators, cuda:0*N, ... (default $SPMD_DEVICES, else cpu:2)",
           "LIST");
  app.whole("--epochs", f.epochs, 1, 1000000, "epochs to train");
  app.whole("--batch", f.batch, 1, int64_t(1) << 30,
            "global batch, dealt over the devices (padded, masked, where it does not split)");
  app.number("--lr", f.lr, 0, 1e30, "learning rate");
  app.number("--momentum", f.momentum, 0, 1, "SGD momentum");
  app.number("--weight-decay", f.weightDecay, 0, 1e30, "L2 weight decay");
  app.oneOf("--optimizer", f.optimizer, {"sgd", "adam"}, "the optimizer");
  app.oneOf("--bn", f.bn, {"replica", "cross"},
            "replica: BatchNorm statistics per device (as DDP); cross: over all devices (SyncBatchNorm)");
  app.oneOf("--layouts", f.layouts, {"backend", "plain"},
            "backend: blocked layouts where the backend's kernels read them; plain: every tensor plain NCHW "
            "(to compare speed or numerics)");
  app.whole("--width", f.width, 1, 4096, "channels of the first stage; 64 is the seeds' full model");
  app.whole("--train-limit", f.trainLimit, 0, int64_t(1) << 40, "use the first N training images (0: all 60,000)");
  app.whole("--test-limit", f.testLimit, 0, int64_t(1) << 40, "use the first N test images (0: all 10,000)");
  app.whole("--eval-batch", f.evalBatch, 1, int64_t(1) << 30, "test batch");
  app.whole("--seed", f.seed, uint64_t(INT64_MAX), "initialization and shuffling seed");
  app.text("--out", f.out, "metrics.csv, metrics.png, checkpoint.safetensors go here", "DIR");
  app.text("--resume", f.resume, "continue from a checkpoint file or an --out directory", "PATH");
  app.whole("--max-steps", f.maxSteps, 0, INT64_MAX, "stop after N steps in all, writing a checkpoint (0: no limit)");
  app.text(
      "--data-dir", f.dataDir,
      "the Fashion-MNIST *-ubyte.gz files (default $SPMD_FASHION_MNIST_DIR, else /usr/share/datasets/fashion-mnist)",
      "DIR");
  app.flag("--no-plot", f.plot, "do not draw metrics.png", false);
  app.flag("--trace", f.trace,
           "write a Chrome trace of the run (every replica's steps, collectives, compiles, data waits) to "
           "trace.json beside the metrics (trace.<process>.json under mpirun); open it in Perfetto");
  app.whole("--accumulate", f.accumulate, 1, 4096,
            "run each device's share of the batch as A micro-batches (a power of two) and update once: the same "
            "bits as A times the devices (per-replica BatchNorm)");
  app.whole("--threads-per-replica", f.threadsPerReplica, 1, 4096,
            "OpenMP threads each device's kernels use (default: SPMD_THREADS_PER_REPLICA, else the host's cores "
            "divided among every device of every process on it); a run's bits depend on the device count and this "
            "number");
  app.number("--clip-norm", f.clipNorm, 0, 1e30,
             "clip the averaged gradients to this global norm (torch.nn.utils.clip_grad_norm_; 0: off)");
  app.flag("--no-decay-norm-bias", f.noDecayNormBias,
           "no weight decay on BatchNorm scales and shifts and on biases (a parameter group, optim/Groups.h)");
  app.number("--ema", f.ema, 0, 0.999999999,
             "keep an exponential moving average of the parameters and BatchNorm statistics with this decay "
             "(AveragedModel's EMA, use_buffers=True) and evaluate it instead (0: off); it remembers about "
             "1 / (1 - decay) steps, so keep that well below the run's steps");
  app.oneOf("--precision", f.precision, {"f32", "bf16"},
            "bf16: mixed precision as torch.autocast (bf16 activations, convolutions and matmuls; f32 parameters, "
            "optimizer, BatchNorm statistics and loss); convolutions and matmuls in the backend's bf16 kernels where "
            "it has them (SPMD_NATIVE_BF16), the rest in f32 between bf16 roundings");
  app.flag("--shard-update", f.shardUpdate,
           "ZeRO-1: each device updates its 1/N slice of the parameters and optimizer state and keeps only that "
           "slice of the state (PmapOptions::shardUpdate); the same bits as without, checkpoints alike");
  app.flag("--fsdp", f.fsdp,
           "FSDP (fully sharded data parallelism): as --shard-update, and each layer's parameters are gathered "
           "from the devices' slices right before the layer runs, in the forward and again in the backward pass, "
           "and freed after it (PmapOptions::fullyShard); the same bits as without, checkpoints alike");
  app.footer("Every training image is seen each epoch: a batch that does not split over the devices, and the "
             "epoch's last one, are padded to one shape with masked rows (every step compiles once).");
  if (auto status = app.parse(argc, argv)) {
    exitStatus = *status;
    return std::nullopt;
  }
  if (f.devices.empty()) {
    const char* env = std::getenv("SPMD_DEVICES");
    f.devices = env && *env ? env : "cpu:2";
  }
  return f;
}

}  // namespace sample
