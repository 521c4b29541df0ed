// train(): one pmap'ed training step (forward, loss, backward, optimizer, new BN statistics;
// the compiler averages gradients, loss and statistics over devices) and one pmap'ed evaluation
// step (BN in inference form), driven by a prefetching loader, with per-epoch metrics and an
// atomic safetensors checkpoint after every epoch (and when --max-steps stops the run).
#include "Train.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>

#include "Checkpoint.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/device/Variants.h"
#include "Report.h"
#include "runtime/base/Parse.h"
#include "RunDirectory.h"
#include "frontend/data/Loader.h"
#include "frontend/spmd.h"
#include "frontend/models/ResNet.h"
#include "frontend/data/FashionMnist.h"

namespace sample {
namespace {

using spmd::Array;
using spmd::Tensor;
using spmd::Tree;

double fraction(int64_t part, int64_t whole) { return whole ? double(part) / double(whole) : 0.0; }

// Every process must train the same model the same way: differing flags stop all of them now,
// naming the flag, instead of training P different models (or failing later inside MPI).
void checkProcessesAgreeOnFlags(const Flags& f) {
  spmd::Facts flags;
  for (const auto& [key, value] : runIdentity(f)) {
    // Numbers as they read best ("0.1"): the shortest text that reads back to the same double.
    char text[32];
    double number = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
    bool real = error == std::errc() && end == value.data() + value.size() && value.find('.') != std::string::npos;
    flags.emplace_back("--" + key, real ? std::string(text, std::to_chars(text, text + sizeof text, number).ptr) : value);
  }
  for (auto [key, value] : {std::pair<std::string, std::string>{"epochs", std::to_string(f.epochs)},
                            {"devices", f.devices}, {"layouts", f.layouts}, {"eval-batch", std::to_string(f.evalBatch)},
                            {"test-limit", std::to_string(f.testLimit)}, {"max-steps", std::to_string(f.maxSteps)},
                            {"resume", f.resume}, {"accumulate", std::to_string(f.accumulate)},
                            {"shard-update", f.shardUpdate ? "on" : "off"}, {"fsdp", f.fsdp ? "on" : "off"},
                            {"precision", f.precision}})
    flags.emplace_back("--" + key, value);
  spmd::checkProcessesAgree(flags, "resnet18_fashion_mnist's flags");
}

// --no-decay-norm-bias: BatchNorm scales and shifts ("stage1.0.bn1.weight") and biases decay-free.
std::vector<spmd::optim::ParamGroup> groups(const Flags& f) {
  if (!f.noDecayNormBias) return {};
  return {{.match = {"*.bias", "*.bn*"}, .weightDecay = 0.0}};
}

// The optimizer state tree holds the EMA's state (--ema) under this prefix, so checkpoints,
// donation and the drift check carry it with the optimizer's.
constexpr const char* kEma = "ema.";

// What --ema averages: the parameters and, under "buffers.", the BatchNorm running statistics
// (AveragedModel with use_buffers=True): the average evaluated with the current weights'
// statistics would normalize with statistics of other weights.
constexpr const char* kBuffers = "buffers.";
Tree withBuffers(const Tree& params, const Tree& state) {
  Tree out = params;
  for (const auto& [name, value] : state) out.set(kBuffers + name, value);
  return out;
}

// `tree`'s entries under `prefix` (prefix dropped) and, with `inside` false, the others.
Tree part(const Tree& tree, const std::string& prefix, bool inside) {
  Tree out;
  for (const auto& [name, value] : tree)
    if (name.starts_with(prefix) == inside) out.set(inside ? name.substr(prefix.size()) : name, value);
  return out;
}

// One training run: the job, the data, the model and its trees, and where the loop is. The
// phases below are its methods; train() calls them in order.
struct Run {
  const Flags& f;
  // A job of several processes (mpirun): each process runs its --devices, reads its replicas'
  // rows of every batch, and process 0 alone prints, writes metrics and checkpoints.
  const int processes = spmd::processCount(), me = spmd::processIndex();
  const bool lead = me == 0;
  std::string layout;  // "2 processes x cpu:2 x 2 micro-batches", for messages and checkpoints
  spmd::data::Dataset trainSet, testSet;
  std::unique_ptr<spmd::nn::Sequential> model;
  spmd::optim::Sgd sgd;
  spmd::optim::Adam adam;
  std::optional<spmd::optim::Ema> ema;  // --ema: its state rides in `opt` under "ema."
  Tree params, state, opt;
  Position at;
  std::string resumedThreads;  // threads per replica the resumed checkpoint ran with
  std::string resumedKernels;  // its kernel choices (KernelChoices::used), compared after the first step
  int threads = 0;
  int64_t devices = 0, evalBatch = 0;
  int64_t parts = 0, partRows = 0;  // a step's parts (devices x accumulate) and rows in each
  std::string checkpoint, csvPath, pngPath;
  bool compileReported = false;  // the train step's compile time is printed after its first step
  // SPMD_LOG_DRIFT_CHECKS, read (and a junk value refused) before the first step.
  bool logDriftChecks = spmd::runtime::envSwitch("SPMD_LOG_DRIFT_CHECKS").value_or(false);

  explicit Run(const Flags& flags);
  void resume();
  template <typename Step> void checkShapes(Step& step);
  void printHeader(const std::string& threadsWhy) const;
  template <typename Evaluate> std::pair<double, double> test(Evaluate& evaluate);
  void driftCheck(const std::string& when);
  void saveAt(const Position& position, bool withMetrics);
  template <typename Step> bool trainEpoch(Step& step);
  template <typename Evaluate> double finishEpoch(Evaluate& evaluate);
  // This process's rows of a batch of `n` (its replicas' parts; all rows with one process).
  std::pair<int64_t, int64_t> myRows(int64_t n) const { return {n * me / processes, n * (me + 1) / processes}; }
};

// Data, model and trees, fresh from --seed.
Run::Run(const Flags& flags)
    : f(flags),
      sgd({.learningRate = f.lr, .momentum = f.momentum, .weightDecay = f.weightDecay, .groups = groups(flags)}),
      adam({.learningRate = f.lr, .weightDecay = f.weightDecay, .groups = groups(flags)}) {
  if (f.ema > 0) ema.emplace(f.ema);
  layout = (processes > 1 ? std::to_string(processes) + " processes x " + f.devices : f.devices) +
           (f.accumulate > 1 ? " x " + std::to_string(f.accumulate) + " micro-batches" : "");
  const std::string dataDir = f.dataDir.empty() ? spmd::data::defaultFashionMnistDir() : f.dataDir;
  trainSet = spmd::data::loadFashionMnist("train", f.trainLimit, dataDir);
  testSet = spmd::data::loadFashionMnist("test", f.testLimit, dataDir);
  model = spmd::models::resnet18(
      {.inChannels = 1, .numClasses = 10, .width = f.width, .bnAxisName = f.bn == "cross" ? "batch" : ""});
  std::tie(params, state) = model->initialize(f.seed);
  opt = f.optimizer == "adam" ? adam.init(params) : sgd.init(params);
  if (ema)
    for (const auto& [name, value] : ema->init(withBuffers(params, state))) opt.set(kEma + name, value);
  checkpoint = (std::filesystem::path(f.out) / "checkpoint.safetensors").string();
  csvPath = (std::filesystem::path(f.out) / "metrics.csv").string();
  pngPath = (std::filesystem::path(f.out) / "metrics.png").string();
}

// The trees and the position of --resume's checkpoint (Checkpoint.h), with notes on how it ran.
void Run::resume() {
  Resumed r = loadCheckpoint(f, params, state, opt);
  at = r.at;
  // Both runs on thread-invariant kernels: the threads do not change the bits.
  const auto invariant = r.bits.find("thread_invariant");
  resumedThreads = invariant != r.bits.end() && invariant->second == "yes" && spmd::runtime::threadInvariantKernels()
                       ? ""
                       : r.threads;
  if (!r.kernelChoices.empty()) {
    // The kernels the checkpoint's run timed and ran, taken before this run times any: on the same
    // machine kind the continuation runs the same kernels (checked after the first step).
    resumedKernels = r.kernelChoices;
    const int taken = spmd::runtime::KernelChoices::process().adopt(r.kernelChoices, r.path + "'s kernel_choices");
    if (lead) std::printf("kernels: the checkpoint's %d timed kernel choices are taken\n", taken);
  }
  // What else sets the bits: named where it differs (the model is the same: runIdentity).
  std::string differ;
  for (const auto& [key, now] : runBits(f))
    if (auto was = r.bits.find(key); was != r.bits.end() && was->second != now)
      differ += std::string(differ.empty() ? "" : ", ") + key + " " + was->second + " -> " + now;
  if (!differ.empty() && lead)
    std::printf("warning: this run differs from the checkpoint's in what sets its bits (%s): training continues, "
                "but not bit for bit\n", differ.c_str());
  if (r.layout != layout && differ.empty() && lead)
    std::printf("note: the checkpoint ran on %s, this run on %s: with the same number of devices in all and the "
                "same threads per replica it continues bit for bit, else training continues with other "
                "roundings\n", r.layout.c_str(), layout.c_str());
  if (lead)
    std::printf("resumed %s at epoch %lld, batch %lld (step %lld)\n", r.path.c_str(), static_cast<long long>(at.epoch + 1),
                static_cast<long long>(at.batch), static_cast<long long>(at.step));
}

// The step's threads and devices against the checkpoint and the batch flags.
template <typename Step>
void Run::checkShapes(Step& step) {
  std::string threadsWhy;
  threads = step.threadsPerReplica(&threadsWhy);
  // 0: a backend without host threads (sim, cuda): nothing to compare, its backend is named above.
  if (!resumedThreads.empty() && resumedThreads != "0" && threads != 0 && resumedThreads != std::to_string(threads) &&
      lead)
    std::printf("warning: the checkpoint was trained with %s threads per replica, this run uses %d (%s): oneDNN "
                "rounds differently per thread count, so the run continues but not bit for bit (set "
                "SPMD_THREADS_PER_REPLICA=%s to continue exactly)\n",
                resumedThreads.c_str(), threads, threadsWhy.c_str(), resumedThreads.c_str());
  devices = step.globalDeviceCount();
  if (f.batch > trainSet.size())
    throw spmd::Error("--batch " + std::to_string(f.batch) + " is larger than the " +
                      std::to_string(trainSet.size()) + " training images; lower --batch or raise --train-limit");
  // The batch is dealt to devices x micro-batches parts of one compiled shape; where it does not
  // split evenly (and in each epoch's last batch) the parts are padded with masked rows.
  parts = devices * f.accumulate;
  partRows = spmd::data::layoutOfProcess(f.batch, 0, 1, parts).partRows;
  // The eval batch: no larger than the test set, rounded up to a multiple of the devices.
  const int64_t evalRows = std::min<int64_t>(f.evalBatch, testSet.size());
  evalBatch = (evalRows + devices - 1) / devices * devices;
  printHeader(threadsWhy);
}

void Run::printHeader(const std::string& threadsWhy) const {
  if (!lead) return;
  const int64_t perDevice = partRows * f.accumulate, padding = parts * partRows - f.batch;
  std::printf("ResNet-18 width %lld (%lld parameters) on Fashion-MNIST: %lld train / %lld test "
              "images, %s, global batch %lld (%lld rows per device%s), %s lr %g, BatchNorm %s\n",
              static_cast<long long>(f.width), static_cast<long long>(params.numElements()),
              static_cast<long long>(trainSet.size()), static_cast<long long>(testSet.size()), layout.c_str(),
              static_cast<long long>(f.batch), static_cast<long long>(perDevice),
              padding ? (", " + std::to_string(padding) + " of them padding, masked").c_str() : "",
              f.optimizer.c_str(), f.lr, f.bn == "cross" ? "cross-replica" : "per replica");
  if (trainSet.size() % f.batch != 0)
    std::printf("every epoch sees all %lld training images: its last batch has %lld, padded and masked\n",
                static_cast<long long>(trainSet.size()), static_cast<long long>(trainSet.size() % f.batch));
  if (f.clipNorm > 0 || f.noDecayNormBias || f.ema > 0)
    std::printf("gradients clipped to global norm %s; weight decay %s; %s\n",
                f.clipNorm > 0 ? std::to_string(f.clipNorm).c_str() : "no (off)",
                f.noDecayNormBias ? "not on BatchNorm parameters and biases" : "on every parameter",
                f.ema > 0 ? ("evaluating an EMA of the parameters and BatchNorm statistics, decay " + std::to_string(f.ema)).c_str()
                          : "evaluating the parameters");
  if (f.precision == "bf16")
    std::printf("mixed precision (--precision bf16): bf16 activations, convolutions and matmuls; f32 parameters, "
                "optimizer, BatchNorm statistics and loss; convolutions and matmuls: %s; the rest in f32 between "
                "bf16 roundings\n", spmd::bf16KernelPath(f.devices).c_str());
  if (f.shardUpdate && !f.fsdp) {
    const double stateMb = double(opt.numElements()) * 4 / 1e6;
    std::printf("ZeRO-1 (--shard-update): each of the %lld devices updates 1/%lld of the parameters and keeps 1/%lld "
                "of the optimizer state (%.2f of %.2f MB)\n",
                static_cast<long long>(devices), static_cast<long long>(devices), static_cast<long long>(devices),
                stateMb / double(devices), stateMb);
  }
  if (f.fsdp) {
    const double paramMb = double(params.numElements()) * 4 / 1e6, stateMb = double(opt.numElements()) * 4 / 1e6;
    std::printf("FSDP (--fsdp): each of the %lld devices keeps 1/%lld of the parameters and optimizer state (%.2f of "
                "%.2f MB) and gathers a layer's parameters right before the layer runs, forward and backward\n",
                static_cast<long long>(devices), static_cast<long long>(devices), (paramMb + stateMb) / double(devices),
                paramMb + stateMb);
  }
  if (f.accumulate > 1)
    std::printf("gradient accumulation: %lld micro-batches of %lld images per device and step%s\n",
                static_cast<long long>(f.accumulate), static_cast<long long>(partRows),
                (f.bn == "cross" ? std::string("; with --bn cross the BatchNorm statistics are taken over one "
                                               "micro-batch's devices, so this is not the same run as more devices")
                                 : " (the same bits as " + std::to_string(devices * f.accumulate) +
                                       " devices with threads per replica alike)")
                    .c_str());
  if (threads > 0 && spmd::runtime::threadInvariantKernels())
    std::printf("threads per replica: %d (%s); thread-invariant kernels (SPMD_THREAD_INVARIANT=1): a run's bits "
                "depend on the device count, not on this number\n",
                threads, threadsWhy.c_str());
  else if (threads > 0)
    std::printf("threads per replica: %d (%s); a run's bits depend on the device count and this number\n", threads,
                threadsWhy.c_str());
}

// Test loss and accuracy over the whole test set; the last batch is padded with row 0 and the
// padding ignored.
template <typename Evaluate>
std::pair<double, double> Run::test(Evaluate& evaluate) {
  double lossSum = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < testSet.size(); start += evalBatch) {
    int64_t rows = std::min(evalBatch, testSet.size() - start);
    auto [begin, end] = myRows(evalBatch);  // this process's rows of the padded batch
    int64_t mine = std::clamp<int64_t>(rows - begin, 0, end - begin);  // real (unpadded) ones
    Array x = Array::zeros(spmd::DType::f32, {end - begin, 1, 28, 28});
    Array y = Array::zeros(spmd::DType::i32, {end - begin});
    size_t imageBytes = 28 * 28 * sizeof(float);
    std::memcpy(x.data(), testSet.images().data() + (start + begin) * imageBytes, mine * imageBytes);
    std::memcpy(y.data(), testSet.labels().data() + (start + begin) * sizeof(int32_t), mine * sizeof(int32_t));
    // Per-example losses, predictions; with --ema of the averaged parameters and statistics.
    const Tree averaged = ema ? spmd::optim::Ema::weights(part(opt, kEma, true)) : Tree();
    std::tuple<Tensor, Tensor> result =
        ema ? evaluate(part(averaged, kBuffers, false), part(averaged, kBuffers, true), x, y)
            : evaluate(params, state, x, y);
    auto& [losses, predictions] = result;
    auto lossValues = losses.array().values<float>();
    auto predicted = predictions.array().values<int32_t>();
    auto labels = y.values<int32_t>();
    for (int64_t r = 0; r < mine; ++r) {
      lossSum += lossValues[r];
      correct += predicted[r] == labels[r];
    }
  }
  std::vector<double> sums{lossSum, double(correct)};
  spmd::processSum(sums, "test loss and accuracy");
  return {sums[0] / double(testSet.size()), fraction(int64_t(sums[1]), testSet.size())};
}

// The drift check: replicated state the same bits on every replica of every process, before
// a checkpoint makes it permanent (a mismatch stops the run and keeps the last checkpoint).
void Run::driftCheck(const std::string& when) {
  auto start = std::chrono::steady_clock::now();
  const std::string what = "drift check after " + when;
  spmd::checkReplicasAgree(params, "params.", what);
  spmd::checkReplicasAgree(opt, "opt.", what);
  spmd::checkReplicasAgree(state, "state.", what);
  if (logDriftChecks && lead)
    std::printf("%s: every replica agrees (%.1f ms)\n", what.c_str(),
                1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The checkpoint at `position` (and metrics.csv with it when `withMetrics`), written by process 0
// between two barriers of the job.
void Run::saveAt(const Position& position, bool withMetrics) {
  spmd::processBarrier("before the checkpoint");
  // With --shard-update or --fsdp each process holds its devices' slices of the parameters and optimizer
  // state: every process reads them (gathering the slices, in the same order everywhere) before
  // process 0 writes them.
  for (const Tree* tree : {&params, &state, &opt})
    for (const auto& [name, value] : *tree) value.array();
  if (lead && withMetrics) writeFileAtomically(csvPath, csvHeader() + at.csv);
  if (lead) saveCheckpoint(checkpoint, f, layout, threads, params, state, opt, position);
  spmd::processBarrier("after the checkpoint");
}

// The rest of epoch at.epoch from batch at.batch. Returns false when --max-steps stopped the run
// (after writing its checkpoint); throws, keeping the last checkpoint, when the loss diverges.
template <typename Step>
bool Run::trainEpoch(Step& step) {
  spmd::data::Prefetcher loader(trainSet, f.batch, f.seed, at.epoch, at.batch, 2,
                                spmd::data::layoutOfProcess(f.batch, me, processes, parts / processes));
  std::optional<Progress> progress;
  if (lead) progress.emplace(at.epoch + 1, f.epochs, loader.batchesPerEpoch(), at.batch, /*mayDrawBar=*/processes == 1);
  auto start = std::chrono::steady_clock::now();
  double carriedSeconds = at.seconds;
  while (auto batch = loader.next()) {
    const Array lossScale = Array::of<float>({}, std::vector<float>{float(batch->lossScale())});
    std::tuple<Tree, Tree, Tree, Tensor, Tensor> result =
        step(params, opt, state, batch->images(), batch->labels(), batch->mask, lossScale);
    auto& [p2, o2, s2, loss, predictions] = result;
    float stepLoss = loss.array().values<float>()[0];
    if (!std::isfinite(stepLoss)) {  // the loss is replicated: every process stops here
      if (progress) progress->finish();
      throw spmd::Error("the loss is " + std::string(std::isnan(stepLoss) ? "NaN" : "infinite") + " at step " +
                        std::to_string(at.step + 1) + " (epoch " + std::to_string(at.epoch + 1) + ", batch " +
                        std::to_string(batch->index + 1) + "): training diverged, so it stops here and " + checkpoint +
                        " keeps the last good state; lower --lr, or run with SPMD_DEBUG_NANS=1 "
                        "to find the op that made the first NaN");
    }
    params = p2, opt = o2, state = s2;
    if (lead && !compileReported) {
      std::printf("train_step: compiled and ran its first step in %.2f s (trace, passes, lowering, kernels)\n",
                  step.lastCompileSeconds());
      std::fflush(stdout);
      compileReported = true;
    }
    if (!resumedKernels.empty()) {
      const std::string differ = spmd::runtime::KernelChoices::differences(
          resumedKernels, spmd::runtime::KernelChoices::process().used(), "the checkpoint's kernel_choices");
      if (!differ.empty() && lead)
        std::printf("warning: this run's kernels differ from the checkpoint's run (%s), so it continues but not bit "
                    "for bit; resume on the machine kind that wrote the checkpoint, with the same threads per replica\n",
                    differ.c_str());
      resumedKernels.clear();
    }
    at.lossSum += double(stepLoss) * double(batch->examples);
    auto predicted = predictions.array().values<int32_t>();
    auto labels = batch->labels().values<int32_t>();
    auto examples = batch->mask.values<float>();
    std::vector<double> correct{0};
    for (size_t r = 0; r < labels.size(); ++r) correct[0] += examples[r] != 0 && predicted[r] == labels[r];
    if (processes > 1) spmd::processSum(correct, "correct predictions of a step");
    at.correct += int64_t(correct[0]);
    at.seen += batch->examples;
    ++at.step;
    at.batch = batch->index + 1;
    at.seconds = carriedSeconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (progress)
      progress->update(at.batch, at.lossSum / double(at.seen), fraction(at.correct, at.seen),
                       double(at.seen) / at.seconds);
    if (f.maxSteps > 0 && at.step >= f.maxSteps) {
      if (progress) progress->finish();
      at.dataWait += loader.waitSeconds();
      driftCheck("step " + std::to_string(at.step));
      saveAt(at, false);
      if (lead)
        std::printf("stopped after %lld steps (--max-steps); checkpoint %s (continue with --resume %s)\n",
                    static_cast<long long>(at.step), checkpoint.c_str(), f.out.c_str());
      return false;
    }
  }
  if (progress) progress->finish();
  at.dataWait += loader.waitSeconds();
  return true;
}

// Tests the epoch just trained, prints and records its metrics, and checkpoints the start of the
// next epoch. Returns the test accuracy.
template <typename Evaluate>
double Run::finishEpoch(Evaluate& evaluate) {
  auto [testLoss, testAccuracy] = test(evaluate);
  EpochMetrics m{at.epoch + 1, at.lossSum / double(std::max<int64_t>(1, at.seen)), fraction(at.correct, at.seen),
                 testLoss, testAccuracy, at.seconds, double(at.seen) / std::max(1e-9, at.seconds), at.dataWait};
  if (lead)
    std::printf("epoch %lld/%lld: %lld images, train loss %.4f acc %.2f%% | test loss %.4f acc %.2f%% | %.1f s "
                "(%.0f img/s, waited %.2f s for data)\n",
                static_cast<long long>(m.epoch), static_cast<long long>(f.epochs), static_cast<long long>(at.seen),
                m.trainLoss, 100 * m.trainAccuracy,
                m.testLoss, 100 * m.testAccuracy, m.seconds, m.imagesPerSecond, m.dataWaitSeconds);
  at.csv += csvRow(m);
  driftCheck("epoch " + std::to_string(at.epoch + 1));
  Position next;  // the start of the next epoch
  next.epoch = at.epoch + 1, next.step = at.step, next.csv = at.csv;
  saveAt(next, true);
  std::string why;
  if (lead && f.plot && !plotMetrics(f.out, why)) std::printf("no plot: %s\n", why.c_str());
  at = next;
  return testAccuracy;
}

spmd::DType compute(const Flags& f) { return f.precision == "bf16" ? spmd::DType::bf16 : spmd::DType::f32; }

// The pmap'ed training step (forward, loss, backward, optimizer, new BN statistics; the compiler
// averages gradients, loss and statistics over devices) and evaluation step (BN in inference form).
auto compileSteps(const Flags& f, Run& run) {
  // `mask` marks a padded batch's examples (BatchNorm's statistics and the loss take them
  // alone); `scale` is parts / examples, so the loss's mean over the parts is the examples' mean.
  auto step = spmd::pmap(
      [&](const Tree& p, const Tree& o, const Tree& s, const Tensor& x, const Tensor& y, const Tensor& mask,
          const Tensor& scale) {
        auto [loss, grads, aux] = spmd::value_and_grad(
            [&](const Tree& q) {
              auto [logits, newState] =
                  run.model->apply(q, s, x, {.training = true, .rng = {}, .mask = mask, .compute = compute(f)});
              Tensor losses = spmd::mul(spmd::softmaxCrossEntropy(logits, y), mask);
              return std::pair{spmd::mul(spmd::sum(losses, {0}), scale),
                               std::pair{newState, spmd::argmax(logits, 1)}};
            },
            spmd::has_aux)(p);
        // The gradients arrive averaged over the replicas (spmd-insert-pmean), so the norm is
        // the whole batch's, the same on every replica.
        if (f.clipNorm > 0) grads = spmd::optim::clipByGlobalNorm(grads, f.clipNorm).grads;
        const Tree optimizerState = part(o, kEma, false);
        auto [newParams, newOpt] = f.optimizer == "adam" ? run.adam.update(p, grads, optimizerState)
                                                         : run.sgd.update(p, grads, optimizerState);
        if (run.ema)
          for (const auto& [name, value] : run.ema->update(part(o, kEma, true), withBuffers(newParams, aux.first)))
            newOpt.set(kEma + name, value);
        return std::tuple{newParams, newOpt, aux.first, loss, aux.second};
      },
      {.inAxes = {spmd::replicated, spmd::replicated, spmd::replicated, spmd::split, spmd::split, spmd::split,
                  spmd::replicated},
       .outAxes = {spmd::replicated, spmd::replicated, spmd::replicated, spmd::replicated, spmd::split},
       .devices = f.devices, .name = "train_step", .assignLayouts = f.layouts == "backend",
       // Parameters, optimizer and BN state stay on the devices and are updated in place; only
       // the loss and predictions (printed) and checkpoints are read back to the host.
       .donateArguments = {0, 1, 2}, .threadsPerReplica = int(f.threadsPerReplica),
       .accumulate = int(std::min<int64_t>(f.accumulate, 1 << 20)), .shardUpdate = f.shardUpdate,
       .fullyShard = f.fsdp, .trace = f.trace ? (std::filesystem::path(f.out) / "trace.json").string() : ""});
  auto evaluate = spmd::pmap(
      [&](const Tree& p, const Tree& s, const Tensor& x, const Tensor& y) {
        Tensor logits = run.model->apply(p, s, x, {.training = false, .compute = compute(f)}).first;
        return std::tuple{spmd::softmaxCrossEntropy(logits, y), spmd::argmax(logits, 1)};
      },
      {.inAxes = {spmd::replicated, spmd::replicated, spmd::split, spmd::split},
       .outAxes = {spmd::split, spmd::split}, .devices = f.devices, .name = "eval_step",
       .assignLayouts = f.layouts == "backend", .threadsPerReplica = int(f.threadsPerReplica)});
  return std::pair{std::move(step), std::move(evaluate)};
}

}  // namespace

double train(const Flags& f) {
  std::optional<RunDirectory> runDirectory;
  if (spmd::processIndex() == 0) runDirectory.emplace(f.out);  // checked and locked before anything else
  spmd::processBarrier("the run directory is ready");
  checkProcessesAgreeOnFlags(f);
  Run run(f);
  if (!f.resume.empty()) run.resume();
  auto [step, evaluate] = compileSteps(f, run);
  run.checkShapes(step);
  // Compile (and memory-check) the evaluation step now, so a --eval-batch that does not fit
  // fails before training rather than after the first epoch.
  evaluate(run.params, run.state, Array::zeros(spmd::DType::f32, {run.evalBatch / run.processes, 1, 28, 28}),
           Array::zeros(spmd::DType::i32, {run.evalBatch / run.processes}));
  if (run.lead) std::printf("eval_step: compiled and ran its first step in %.2f s\n", evaluate.lastCompileSeconds());
  double lastAccuracy = 0;
  if (run.at.epoch >= f.epochs) {
    if (run.lead)
      std::printf("the checkpoint has already trained %lld epochs, which --epochs %lld does not "
                  "exceed: nothing to do (pass a larger --epochs to train further)\n",
                  static_cast<long long>(run.at.epoch), static_cast<long long>(f.epochs));
    return lastAccuracy;
  }
  while (run.at.epoch < f.epochs) {
    if (!run.trainEpoch(step)) return lastAccuracy;
    lastAccuracy = run.finishEpoch(evaluate);
  }
  const std::string trace = spmd::writeTrace();
  if (run.lead)
    std::printf("done: test accuracy %.2f%%; metrics %s%s, checkpoint %s%s\n", 100 * lastAccuracy, run.csvPath.c_str(),
                f.plot ? (", plot " + run.pngPath).c_str() : "", run.checkpoint.c_str(),
                trace.empty() ? "" : (", trace " + trace).c_str());
  return lastAccuracy;
}

}  // namespace sample
