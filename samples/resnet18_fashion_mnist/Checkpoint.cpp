// Checkpoint: saving and resuming the sample's run (see Checkpoint.h).
#include "Checkpoint.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "frontend/io/Safetensors.h"
#include "frontend/io/TreeCheckpoint.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/device/Variants.h"
#include "runtime/mpi/Processes.h"

namespace sample {
namespace {

using spmd::Array;
using spmd::Tree;

constexpr const char* kFormat = "spmd-fashion-mnist-1";

// A double as text that reads back to the same bits.
std::string exact(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// The first tensor of `tree` holding a NaN or an infinity ("" when all are finite).
std::string firstNonFinite(const Tree& tree, const std::string& prefix) {
  for (const auto& [name, t] : tree) {
    const Array& a = t.array();
    bool finite = true;
    if (a.dtype == spmd::DType::f32)
      for (float v : a.values<float>()) finite = finite && std::isfinite(v);
    else if (a.dtype == spmd::DType::f64)
      for (double v : a.values<double>()) finite = finite && std::isfinite(v);
    if (!finite) return prefix + name;
  }
  return "";
}

// A number from the checkpoint's metadata; a missing or malformed entry is a clear error.
template <typename T>
T metaNumber(const spmd::io::Checkpoint& c, const std::string& key, const std::string& path) {
  auto it = c.metadata.find(key);
  if (it == c.metadata.end()) throw spmd::Error(path + ": checkpoint metadata has no '" + key + "'");
  std::istringstream in(it->second);
  T value{};
  if (!(in >> value) || !in.eof())
    throw spmd::Error(path + ": checkpoint metadata '" + key + "' is not a number: '" + it->second + "'");
  return value;
}

}  // namespace

std::map<std::string, std::string> runBits(const Flags& f) {
  const std::string backend = f.devices.substr(0, f.devices.find(':'));
  // SPMD_CHANNELS_LAST changes which cuDNN kernels run on cuda (on sim both layouts give the same bits).
  const bool channelsLast = backend == "cuda" && spmd::runtime::cudaChannelsLast();
  return {{"backend", backend},
          {"precision", f.precision},
          {"layouts", f.layouts},
          {"channels_last", channelsLast ? "yes" : "no"},
          {"reduce", spmd::runtime::reduceModeName(spmd::runtime::reduceModeFromEnvironment())},
          {"thread_invariant", spmd::runtime::threadInvariantKernels() ? "yes" : "no"},
          {"tight_rounding", spmd::runtime::tightRoundingKernels() ? "yes" : "no"}};
}

// The flags a checkpoint must agree with to continue the same run.
std::map<std::string, std::string> runIdentity(const Flags& f) {
  return {{"width", std::to_string(f.width)},       {"bn", f.bn},
          {"optimizer", f.optimizer},               {"batch", std::to_string(f.batch)},
          {"seed", std::to_string(f.seed)},         {"lr", exact(f.lr)},
          {"momentum", exact(f.momentum)},          {"weight_decay", exact(f.weightDecay)},
          {"train_limit", std::to_string(f.trainLimit)}, {"clip_norm", exact(f.clipNorm)},
          {"no_decay_norm_bias", f.noDecayNormBias ? "1" : "0"}, {"ema", exact(f.ema)}};
}

void saveCheckpoint(const std::string& path, const Flags& f, const std::string& layout, int threads,
                    const Tree& params, const Tree& state, const Tree& opt, const Position& at) {
  // Never replace a good checkpoint with a diverged one.
  for (auto [tree, prefix] : {std::pair{&params, "params."}, {&state, "state."}, {&opt, "opt."}})
    if (std::string bad = firstNonFinite(*tree, prefix); !bad.empty())
      throw spmd::Error("after step " + std::to_string(at.step) + " tensor '" + bad +
                        "' holds NaN or infinity, so " + path +
                        " was not overwritten; the run diverged (lower --lr, or run with "
                        "SPMD_DEBUG_NANS=1 to find the op that made the first NaN)");
  spmd::io::Checkpoint c;
  spmd::io::addTree(c, "params.", params);
  spmd::io::addTree(c, "state.", state);
  spmd::io::addTree(c, "opt.", opt);
  c.metadata = runIdentity(f);
  for (const auto& [key, value] : runBits(f)) c.metadata[key] = value;
  c.metadata.insert({{"format", kFormat}, {"devices", layout}, {"threads_per_replica", std::to_string(threads)},
                     {"epoch", std::to_string(at.epoch)}, {"batch_in_epoch", std::to_string(at.batch)},
                     {"step", std::to_string(at.step)}, {"epoch_example_loss_sum", exact(at.lossSum)},
                     {"epoch_correct", std::to_string(at.correct)}, {"epoch_seen", std::to_string(at.seen)},
                     {"epoch_seconds", exact(at.seconds)},
                     {"epoch_data_wait", exact(at.dataWait)}, {"metrics_csv", at.csv},
                     // The kernels timed on this machine that the run ran: a resume runs them again.
                     {"kernel_choices", spmd::runtime::KernelChoices::process().used()}});
  spmd::io::saveSafetensors(path, c);
}

Resumed loadCheckpoint(const Flags& f, Tree& params, Tree& state, Tree& opt) {
  Resumed r;
  Position& at = r.at;
  std::string path = f.resume;
  if (std::filesystem::is_directory(path)) path = (std::filesystem::path(path) / "checkpoint.safetensors").string();
  spmd::io::Checkpoint c = spmd::io::loadSafetensors(path);
  if (c.metadata["format"] != kFormat)
    throw spmd::Error(path + ": not a checkpoint of this sample (format '" + c.metadata["format"] +
                      "', expected '" + kFormat + "')");
  // Keys added after a checkpoint was written read as their flag's default (off).
  for (const char* later : {"clip_norm", "no_decay_norm_bias", "ema"})
    if (!c.metadata.count(later)) c.metadata[later] = runIdentity(Flags{})[later];
  for (const auto& [key, value] : runIdentity(f))
    if (c.metadata[key] != value)
      throw spmd::Error(path + ": the checkpoint was trained with --" + key + " " + c.metadata[key] +
                        " but this run has " + value + "; pass the same flags to resume it");
  params = spmd::io::readTree(c, "params.", params, path, "was it written with another --width?");
  state = spmd::io::readTree(c, "state.", state, path, "was it written with another --width?");
  opt = spmd::io::readTree(c, "opt.", opt, path, "was it written with another --width or --optimizer?");
  at.epoch = metaNumber<int64_t>(c, "epoch", path);
  at.batch = metaNumber<int64_t>(c, "batch_in_epoch", path);
  at.step = metaNumber<int64_t>(c, "step", path);
  at.correct = metaNumber<int64_t>(c, "epoch_correct", path);
  at.seen = metaNumber<int64_t>(c, "epoch_seen", path);
  // Checkpoints written before every example was seen summed batch means over full batches.
  at.lossSum = c.metadata.count("epoch_example_loss_sum")
                   ? metaNumber<double>(c, "epoch_example_loss_sum", path)
                   : metaNumber<double>(c, "epoch_loss_sum", path) * double(f.batch);
  at.seconds = metaNumber<double>(c, "epoch_seconds", path);
  at.dataWait = metaNumber<double>(c, "epoch_data_wait", path);
  at.csv = c.metadata["metrics_csv"];
  r.layout = c.metadata["devices"];
  r.threads = c.metadata["threads_per_replica"];
  r.kernelChoices = c.metadata.count("kernel_choices") ? c.metadata["kernel_choices"] : "";
  for (const auto& [key, _] : runBits(f))
    if (c.metadata.count(key)) r.bits[key] = c.metadata[key];
  r.path = path;
  return r;
}

}  // namespace sample
