// The multi-process test worker: three SGD steps of a reduced-width ResNet-18 (width 2, 16x16
// inputs, global batch 24, cross-replica or per-replica BatchNorm, f32 or f64) on this
// process's devices, each process passing the rows of its own replicas. Every process writes
// its final parameters, BN state, optimizer state, losses and a few checked reductions (pmax of
// the loss, pmean and psum of a parameter) as raw bytes (in name order) to <out>.<process>, and
// process 0 their names and sizes to <out>.index, so a driver can compare layouts bit for bit
// (tests/dist/run_dist.py);
// the tensor-parallel mesh checks' (an MLP's and a transformer block's) parameters and losses go
// to <out>.mesh.<process>.
// Faults for the failure tests: at step --fault-step, process --fault-process throws inside
// the step (a bad label), kills itself, hangs, stops itself (SIGSTOP), or flips a bit of its first replica's copy of
// fc.weight (caught by the drift check, which runs after every step then). With --checkpoint,
// process 0 saves the state after every step (barriers around). --lr and --init-seed let a
// test start processes that disagree. Before training, every run checks the fold order of a psum
// over all replicas against its definition (checkFoldOrder).
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "frontend/io/Safetensors.h"
#include "frontend/spmd.h"
#include "frontend/models/ResNet.h"
#include "frontend/models/TensorParallelMlp.h"
#include "frontend/models/Transformer.h"
#include "runtime/exec/DeviceArray.h"
#include "tools/cli/Cli.h"

using namespace spmd;

namespace {

constexpr int64_t kBatch = 24, kSize = 16;

struct Flags {
  std::string devices = "cpu:1", out, fault, checkpoint, bn = "cross", dtype = "f32";
  int steps = 3, faultProcess = 1, faultStep = 1, initSeed = 7, accumulate = 1, microAtOnce = 0;
  double lr = 0.05;
  int64_t bucketBytes = 25 << 20;
};

// The flags through CLI11 (tools/cli); nullopt with `status` set when the program should stop.
std::optional<Flags> parse(int argc, char** argv, int& status) {
  Flags f;
  spmd::cli::Flags app("dist_train",
                       "The multi-process test worker: SGD steps of a width-2 ResNet-18, state written for comparison "
                       "(tests/dist/run_dist.py).");
  app.text("--devices", f.devices, "this process's devices", "LIST");
  app.text("--out", f.out, "write <out>.<process> (raw state) and <out>.index", "PREFIX");
  app.whole("--steps", f.steps, 1, 1000, "training steps");
  app.oneOf("--fault", f.fault, {"", "throw", "kill", "hang", "stop", "flip", "lone-read"}, "the fault to inject");
  app.whole("--fault-process", f.faultProcess, 0, 1 << 20, "the process that faults");
  app.whole("--fault-step", f.faultStep, 0, 1000, "the step at which it faults");
  app.text("--checkpoint", f.checkpoint, "process 0 saves the state here after every step", "PATH");
  app.oneOf("--bn", f.bn, {"cross", "per"}, "BatchNorm statistics over all replicas or per replica");
  app.number("--lr", f.lr, 0, 1e30, "learning rate");
  app.whole("--init-seed", f.initSeed, 0, INT32_MAX, "initialization seed");
  app.whole("--accumulate", f.accumulate, 1, 4096, "micro-batches per device and step");
  app.whole("--micro-at-once", f.microAtOnce, 0, 4096, "micro-batches a device runs at once (0: as the cores hold)");
  app.oneOf("--dtype", f.dtype, {"f32", "f64", "bf16"},
            "the element type of the model and data (bf16: mixed precision, f32 parameters)");
  app.whole("--bucket-bytes", f.bucketBytes, 4, int64_t(1) << 40, "the largest combined gradient all-reduce");
  if (auto stop = app.parse(argc, argv)) {
    status = *stop;
    return std::nullopt;
  }
  return f;
}

Array randomImages(int step, DType dtype) {
  Array x = Array::zeros(dtype, {kBatch, 1, kSize, kSize});
  std::mt19937_64 rng(100 + step);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < x.numel(); ++i)
    if (dtype == DType::f32) x.values<float>()[i] = u(rng);
    else x.values<double>()[i] = u(rng);
  return x;
}

// `tree` with every f32 leaf in `dtype`.
Tree converted(const Tree& tree, DType dtype) {
  if (dtype == DType::f32) return tree;
  Tree out;
  for (const auto& [name, t] : tree) {
    Array a = t.array(), b = Array::zeros(dtype, a.shape);
    for (int64_t i = 0; i < a.numel(); ++i) b.values<double>()[i] = a.values<float>()[i];
    out.set(name, b);
  }
  return out;
}

// Rows [begin, end) of a [kBatch, ...] array (a view; the step copies its inputs).
Array rows(const Array& a, int64_t begin, int64_t end) {
  Shape shape = a.shape;
  shape[0] = end - begin;
  return Array::view(a, begin * (a.bytes() / a.shape[0]), shape);
}

// Appends the tree's tensors' bytes, and a line "<prefix><name> <elements>" each to `index`.
void append(std::string& bytes, std::string& index, const Tree& tree, const std::string& prefix) {
  for (const auto& [name, t] : tree) {
    Array a = t.array();
    bytes.append(reinterpret_cast<const char*>(a.data()), a.bytes());
    index += prefix + name + " " + std::to_string(a.numel()) + "\n";
  }
}

// The fold order of a psum across every replica of the job, checked against its definition
// (runtime/device/Fold.h, written out again here): exact mode folds a fixed binary tree over the
// replica index, node (h, i) = node (h-1, 2i) + node (h-1, 2i+1), or its left child alone where
// the right one starts at or past N; fast mode (two processes) sums each process's replicas as
// their own tree and then the two processes' sums. Each replica holds f64 values of both signs
// over 60 binary orders of magnitude, so that sums in another order (a reversed fold, a left
// fold, fast instead of exact where the two differ) give other bits; the check throws where
// they would not.
double treeFold(const std::vector<double>& v, size_t begin, size_t size, size_t end) {
  if (size == 1) return v[begin];
  size_t half = size / 2;
  if (begin + half >= end) return treeFold(v, begin, half, end);
  return treeFold(v, begin, half, end) + treeFold(v, begin + half, half, end);
}
double treeOf(const std::vector<double>& v, size_t begin, size_t end) {
  size_t size = 1;
  while (size < end - begin) size *= 2;
  std::vector<double> block(v.begin() + begin, v.begin() + end);
  return treeFold(block, 0, size, block.size());
}

void checkFoldOrder(const Flags& f, std::string& report) {
  const bool fast = runtime::reduceModeFromEnvironment() == runtime::ReduceMode::Fast;
  auto sum = pmap([](const Tensor& x) { return psum(x, "batch"); },
                  {.inAxes = {split}, .devices = f.devices, .name = "fold_check"});
  const int64_t n = sum.globalDeviceCount(), local = sum.deviceCount(), width = 64;
  const int process = processIndex(), processes = processCount();
  if (fast && processes != 2) {
    report = "fold order: not checked (fast mode with " + std::to_string(processes) +
             " processes: MPI chooses the order)";
    return;
  }
  std::mt19937_64 rng(4242);
  std::vector<std::vector<double>> values(width, std::vector<double>(n));  // [element][replica]
  Array mine = Array::zeros(DType::f64, {local, width});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < width; ++j) {
      double v = std::ldexp(1.0 + double(rng() % (1u << 20)) / (1u << 20), int(rng() % 61) - 30);
      values[j][r] = rng() % 2 ? -v : v;
      if (r / local == process) mine.values<double>()[(r % local) * width + j] = values[j][r];
    }
  Array result = sum(mine).array();
  bool differsFromOthers = n < 3;
  for (int64_t j = 0; j < width; ++j) {
    const std::vector<double>& v = values[j];
    double exact = treeOf(v, 0, n), expected = exact;
    if (fast) expected = treeOf(v, 0, n / 2) + treeOf(v, n / 2, n);
    double left = 0, reversed = 0;
    for (int64_t r = 0; r < n; ++r) left += v[r], reversed += v[n - 1 - r];
    differsFromOthers |= fast ? expected != exact : (exact != left && exact != reversed);
    double got = result.values<double>()[j];
    if (got != expected) {
      char message[256];
      std::snprintf(message, sizeof message, "%s fold order: element %lld of the psum is %.17g, its definition %.17g "
                    "(a left fold gives %.17g, a reversed one %.17g)", fast ? "fast" : "exact", (long long)j, got,
                    expected, left, reversed);
      throw Error(message);
    }
  }
  if (!differsFromOthers && !fast)
    throw Error("the fold check's values give the same sums in other orders: it would not see a wrong one");
  report = std::string("fold order: ") + (fast ? "fast" : "exact") + " mode's definition holds over " +
           std::to_string(n) + " replicas";
  // Two processes of two replicas each: their sums' sum is the exact tree too.
  if (fast && !differsFromOthers) report += " (the same sums as exact mode's for this split)";
}

// all_gather, reduce_scatter and all_to_all within the groups {r, r + n/2} (a mesh's outer axis:
// across the processes in the 2 x K layouts, within one in 1 x N), and an all_to_all of a
// non-leading axis into the leading one, against their definitions: replica r's operand holds 1000 r + element,
// so each result names where it came from.
void checkGroupedAcross(const Flags& f, int64_t n, std::string& report) {
  AxisGroups halves(size_t(n / 2));
  for (int64_t r = 0; r < n; ++r) halves[size_t(r % (n / 2))].push_back(r);
  auto grouped = pmap(
      [&](const Tensor& x) {
        // [2, n]: row a holds x + 100 a; its columns go one to each replica, stacked by source.
        const Tensor rows = concat({reshape(x, {1, n}), reshape(x, {1, n}) + 100.0}, 0);
        return std::tuple{allGather(x, "batch", halves), psumScatter(reshape(x, {2, n / 2}), "batch", halves),
                          allToAll(rows, "batch", 1, 0), allToAll(rows, "batch", 1, 0, halves)};
      },
      {.inAxes = {split}, .outAxes = {split, split, split, split}, .devices = f.devices, .name = "grouped_check"});
  const int64_t local = grouped.deviceCount(), process = processIndex();
  Array mine = Array::zeros(DType::f32, {local, n});
  for (int64_t r = 0; r < local; ++r)
    for (int64_t j = 0; j < n; ++j) mine.values<float>()[r * n + j] = float(1000 * (process * local + r) + j);
  auto [gathered, scattered, exchanged, withinGroups] = grouped(mine);
  for (int64_t r = 0; r < local; ++r) {
    const int64_t me = process * local + r, first = me % (n / 2), position = me / (n / 2);
    for (int64_t source = 0; source < n; ++source)
      for (int64_t a = 0; a < 2; ++a)
        if (exchanged.array().values<float>()[r * 2 * n + 2 * source + a] != float(1000 * source + 100 * a + me))
          throw Error("grouped check: replica " + std::to_string(me) + "'s all_to_all row " +
                      std::to_string(2 * source + a) + " is " +
                      std::to_string(exchanged.array().values<float>()[r * 2 * n + 2 * source + a]) + ", not column " +
                      std::to_string(me) + " of replica " + std::to_string(source) + "'s row " + std::to_string(a));
    // [4, n/2]: member k's row a, its columns at this replica's position (chunk `position`).
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t j = 0; j < n / 2; ++j) {
          const float got = withinGroups.array().values<float>()[r * 2 * n + (k * 2 + a) * (n / 2) + j];
          const float want = float(1000 * (first + k * n / 2) + 100 * a + position * n / 2 + j);
          if (got != want)
            throw Error("grouped check: replica " + std::to_string(me) + "'s all_to_all within groups row " +
                        std::to_string(k * 2 + a) + " element " + std::to_string(j) + " is " + std::to_string(got) +
                        ", its definition " + std::to_string(want));
        }
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t j = 0; j < n; ++j)
        if (gathered.array().values<float>()[(r * 2 + k) * n + j] != float(1000 * (first + k * n / 2) + j))
          throw Error("grouped check: replica " + std::to_string(me) + "'s all_gather row " + std::to_string(k) +
                      " element " + std::to_string(j) + " is not replica " + std::to_string(first + k * n / 2) + "'s");
    for (int64_t j = 0; j < n / 2; ++j) {
      const float want = float(1000 * (2 * first + n / 2) + 2 * (position * n / 2 + j));
      if (scattered.array().values<float>()[r * n / 2 + j] != want)
        throw Error("grouped check: replica " + std::to_string(me) + "'s reduce_scatter element " + std::to_string(j) +
                    " got " + std::to_string(scattered.array().values<float>()[r * n / 2 + j]) + ", its definition " +
                    std::to_string(want));
    }
  }
  report += "; all_gather, reduce_scatter and all_to_all within groups {r, r + " + std::to_string(n / 2) +
            "} hold theirs, as does all_to_all from the columns of [2, n] to the rows of [2n, 1]";
}

// ppermute (a ring) and all_to_all across every replica of the job, against their definitions:
// replica r's operand holds 1000 r + element, so each result names where it came from.
void checkPermutations(const Flags& f, std::string& report) {
  auto exchange = pmap(
      [](const Tensor& x) {
        const int64_t n = axisSize("batch");
        std::vector<std::pair<int64_t, int64_t>> ring;
        for (int64_t r = 0; r < n; ++r) ring.push_back({r, (r + 1) % n});
        AxisGroups pairs(n % 2 ? 1 : size_t(n / 2));  // {2k, 2k + 1}; one group of all for an odd count
        for (int64_t r = 0; r < n; ++r) pairs[n % 2 ? 0 : size_t(r / 2)].push_back(r);
        return std::tuple{ppermute(x, "batch", ring), allToAll(x, "batch", 1, 1), psum(x, "batch", pairs)};
      },
      {.inAxes = {split}, .outAxes = {split, split, split}, .devices = f.devices, .name = "permutation_check"});
  const int64_t n = exchange.globalDeviceCount(), local = exchange.deviceCount();
  const int process = processIndex();
  Array mine = Array::zeros(DType::f32, {local, n});  // one replica's operand: [1, n]
  for (int64_t r = 0; r < local; ++r)
    for (int64_t j = 0; j < n; ++j) mine.values<float>()[r * n + j] = float(1000 * (process * local + r) + j);
  auto [ring, swapped, grouped] = exchange(mine);
  for (int64_t r = 0; r < local; ++r) {
    const int64_t me = process * local + r;
    for (int64_t j = 0; j < n; ++j) {
      const float fromRing = float(1000 * ((me + n - 1) % n) + j), fromAll = float(1000 * j + me);
      // Integers below 2^24: every fold order gives them exactly.
      const float groupSum = n % 2 ? float(1000 * n * (n - 1) / 2 + n * j) : float(1000 * (2 * (me - me % 2) + 1) + 2 * j);
      if (grouped.array().values<float>()[r * n + j] != groupSum)
        throw Error("permutation check: replica " + std::to_string(me) + " element " + std::to_string(j) +
                    " got the grouped psum " + std::to_string(grouped.array().values<float>()[r * n + j]) +
                    ", its definition " + std::to_string(groupSum));
      if (ring.array().values<float>()[r * n + j] != fromRing || swapped.array().values<float>()[r * n + j] != fromAll)
        throw Error("permutation check: replica " + std::to_string(me) + " element " + std::to_string(j) + " got " +
                    std::to_string(ring.array().values<float>()[r * n + j]) + " / " +
                    std::to_string(swapped.array().values<float>()[r * n + j]) + ", its definitions " +
                    std::to_string(fromRing) + " / " + std::to_string(fromAll));
    }
  }
  report = "ppermute and all_to_all: their definitions hold over " + std::to_string(n) +
           " replicas (and psum within groups of " + (n % 2 ? std::to_string(n) : std::string("2")) + ")";
  if (n % 2 == 0) checkGroupedAcross(f, n, report);
}

// One step of a mesh check: the sharded model's loss and parameters against the unsharded
// model's (f64, 1e-12), naming `what`, the step and the first differing element; the loss joins
// `losses`.
void expectUnsharded(const std::string& what, int s, const Tensor& loss, const Tensor& wholeLoss, const Tree& params,
                     const Tree& whole, std::string& losses) {
  const double got = loss.array().values<double>()[0], want = wholeLoss.array().values<double>()[0];
  if (std::abs(got - want) > 1e-12 * std::abs(want))
    throw Error("mesh check: " + what + " step " + std::to_string(s) + " loss " + std::to_string(got) + ", the unsharded " +
                what + "'s " + std::to_string(want));
  for (const auto& [name, t] : whole)
    for (int64_t i = 0; i < t.numel(); ++i)
      if (std::abs(params.at(name).array().values<double>()[i] - t.array().values<double>()[i]) > 1e-12)
        throw Error("mesh check: " + what + " step " + std::to_string(s) + " " + name + "[" + std::to_string(i) +
                    "] differs from the unsharded " + what + "'s");
  const Array l = loss.array();
  losses.append(reinterpret_cast<const char*>(l.data()), l.bytes());
}

// The tensor-parallel MLP (frontend/models/TensorParallelMlp.h) on a mesh of every replica of the
// job, {data: N / 2, model: 2}, two SGD steps in f64: its parameters and losses join the state the
// driver compares across layouts (the same mesh laid out as 1 x 4, 2 x 2 and 4 x 1 processes x
// devices), and each is checked against the unsharded MLP on this process (1e-12).
void checkMesh(const Flags& f, int64_t global, Tree& params, std::string& losses, std::string& report) {
  const int64_t batch = 12, in = 6, hidden = 8, out = 4;
  const double lr = 0.1;
  Mesh mesh({{"data", global / 2}, {"model", 2}});
  auto step = models::tensorParallelMlp(mesh, lr, {.axisName = "mesh", .devices = f.devices, .name = "mesh_check"});
  auto reference = jit([&](const Tree& p, const Tensor& x, const Tensor& y) { return models::mlpStep(p, x, y, lr); },
                       {.name = "mesh_reference"});
  Array x = Array::zeros(DType::f64, {batch, in}), y = Array::zeros(DType::f64, {batch, out});
  for (int64_t i = 0; i < x.numel(); ++i) x.values<double>()[i] = std::sin(0.7 * double(i));
  for (int64_t i = 0; i < y.numel(); ++i) y.values<double>()[i] = std::cos(0.3 * double(i));
  params = models::mlpInit(in, hidden, out, DType::f64, 11);
  Tree whole = params;
  for (int s = 0; s < 2; ++s) {
    auto [w1, b1, w2, b2, loss] = step(params.at("w1"), params.at("b1"), params.at("w2"), params.at("b2"), x, y);
    params = Tree();
    params.set("w1", w1), params.set("b1", b1), params.set("w2", w2), params.set("b2", b2);
    auto [next, wholeLoss] = reference(whole, x, y);
    whole = next;
    expectUnsharded("MLP", s, loss, wholeLoss, params, whole, losses);
  }
  // The same steps with the parameters kept on the devices (each replica its block, bound in
  // place and donated), read once at the end, every process gathering the others' blocks: the
  // same bits.
  auto kept = shardMap(models::TensorParallelMlpBody{lr}, mesh,
                       {.inSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {"data"}, {"data"}},
                        .outSpecs = {{"", "model"}, {"model"}, {"model"}, {}, {}},
                        .pmap = {.axisName = "mesh", .devices = f.devices, .name = "mesh_kept",
                                 .donateArguments = {0, 1, 2, 3}},
                        .keepOnDevices = true});
  Tree first = models::mlpInit(in, hidden, out, DType::f64, 11);
  std::vector<Tensor> onDevices{first.at("w1"), first.at("b1"), first.at("w2"), first.at("b2")};
  for (int s = 0; s < 2; ++s) {
    auto [w1, b1, w2, b2, loss] = kept(onDevices[0], onDevices[1], onDevices[2], onDevices[3], x, y);
    if (s == 1 && kept.lastCall().argumentsInPlace != 4)
      throw Error("mesh check: the kept parameters were bound in place " +
                  std::to_string(kept.lastCall().argumentsInPlace) + " times of 4");
    onDevices = {w1, b1, w2, b2};
  }
  const char* names[] = {"w1", "b1", "w2", "b2"};
  for (size_t k = 0; k < onDevices.size(); ++k) {
    const Array &a = onDevices[k].array(), &b = params.at(names[k]).array();
    if (a.bytes() != b.bytes() || std::memcmp(a.data(), b.data(), a.bytes()) != 0)
      throw Error(std::string("mesh check: ") + names[k] + " kept on the devices differs from the one read every step");
  }
  report = "tensor-parallel MLP on mesh " + mesh.describe() + ": the unsharded MLP's within 1e-12, and the same bits "
           "kept on the devices";
}

// The decoder block (frontend/models/Transformer.h) tensor-parallel on the same mesh: its two
// heads and hidden units split over "model", its batch of 6 sequences over "data", two SGD
// steps in f64, checked against the unsharded block on this process (1e-12); its parameters
// and losses join the mesh state the driver compares across layouts.
void checkMeshTransformer(const Flags& f, int64_t global, Tree& params, std::string& losses, std::string& report) {
  const int64_t vocab = 11, dim = 8, hidden = 16, batch = 6, tokens = 5;
  const double lr = 0.1;
  Mesh mesh({{"data", global / 2}, {"model", 2}});
  auto lossOf = [&](const Tree& p, const Tensor& ids, const Tensor& next, const std::string& axis) {
    Tensor logits = models::transformerLogits(p, ids, {.heads = 2, .modelAxis = axis});
    return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), reshape(next, {-1})), {0});
  };
  auto sgd = [&](const Tree& p, const Tree& g) {
    Tree out;
    for (const auto& [name, t] : p) out.set(name, t - g.at(name) * lr);
    return out;
  };
  const Spec spec = models::transformerSpec("model");
  auto step = shardMap(
      [&](const Tree& p, const Tensor& ids, const Tensor& next) {
        const double replicas = double(axisSize("data") * axisSize("model"));
        auto [share, g] = value_and_grad([&](const Tree& q) { return lossOf(q, ids, next, "model") / replicas; })(p);
        return std::tuple{sgd(p, sumOverCopies(g, spec)), psum(share, "mesh")};
      },
      mesh, {.inSpecs = {spec, {"data"}, {"data"}}, .outSpecs = {spec, {}},
             .pmap = {.axisName = "mesh", .devices = f.devices, .name = "mesh_transformer"}});
  auto reference = jit(
      [&](const Tree& p, const Tensor& ids, const Tensor& next) {
        auto [loss, g] = value_and_grad([&](const Tree& q) { return lossOf(q, ids, next, ""); })(p);
        return std::tuple{sgd(p, g), loss};
      },
      {.name = "mesh_transformer_reference"});
  Array ids = Array::zeros(DType::i32, {batch, tokens}), next = Array::zeros(DType::i32, {batch, tokens});
  for (int64_t i = 0; i < ids.numel(); ++i) {
    ids.values<int32_t>()[i] = int32_t((i * 7 + 3) % vocab);
    next.values<int32_t>()[i] = int32_t((i * 5 + 1) % vocab);
  }
  Tree sharded = models::transformerInit(vocab, dim, hidden, DType::f64, 23), whole = sharded;
  for (int s = 0; s < 2; ++s) {
    auto [p, loss] = step(sharded, Tensor(ids), Tensor(next));
    auto [q, wholeLoss] = reference(whole, Tensor(ids), Tensor(next));
    sharded = p, whole = q;
    expectUnsharded("transformer block", s, loss, wholeLoss, sharded, whole, losses);
  }
  for (const auto& [name, t] : sharded) params.set("transformer." + name, t);
  report = "tensor-parallel transformer block on mesh " + mesh.describe() + ": the unsharded block's within 1e-12";
}

int run(const Flags& f) {
  const int process = processIndex(), processes = processCount();
  const DType dtype = f.dtype == "f64" ? DType::f64 : DType::f32;  // of the parameters and data
  const DType compute = f.dtype == "bf16" ? DType::bf16 : DType::f32;  // mixed precision or none
  auto model = models::resnet18(
      {.inChannels = 1, .numClasses = 10, .width = 2, .bnAxisName = f.bn == "cross" ? "batch" : ""});
  auto [params32, state32] = model->initialize(f.initSeed);
  Tree params = converted(params32, dtype), state = converted(state32, dtype);
  optim::Sgd sgd({.learningRate = f.lr, .momentum = 0.9, .weightDecay = 5e-4});
  Tree opt = sgd.init(params);
  auto step = pmap(
      [&](const Tree& p, const Tree& s, const Tree& o, const Tensor& x, const Tensor& y) {
        auto [loss, grads, newState] = value_and_grad(
            [&](const Tree& q) {
              auto [logits, ns] = model->apply(q, s, x, {.training = true, .compute = compute});
              return std::pair{mean(softmaxCrossEntropy(logits, y), {0}), ns};
            },
            has_aux)(p);
        auto [newParams, newOpt] = sgd.update(p, grads, o);
        // Reductions gradient accumulation must count as more devices do (compared across
        // layouts): the worst replica's loss, which differs between micro-batches, and a
        // parameter's mean (all-reduced with the gradients) and sum, the same on every one.
        const Tensor& bias = p.at("fc.bias");
        return std::tuple{newParams, newState, newOpt, loss, pmax(loss, "batch"), pmean(bias, "batch"), psum(bias, "batch")};
      },
      {.inAxes = {replicated, replicated, replicated, split, split}, .devices = f.devices,
       .bucketBytes = f.bucketBytes, .name = "dist_step", .driftCheckEvery = f.fault == "flip" ? 1 : 0, .accumulate = f.accumulate,
       .microBatchesAtOnce = f.microAtOnce,
       // lone-read: the parameters stay sliced across the processes (ZeRO-1), and the checkpoint
       // below reads them on process 0 alone, which must stop the job naming the mistake.
       .shardUpdate = f.fault == "lone-read"});
  std::string foldReport = "fold order: not checked (accumulation)";
  if (f.accumulate == 1) checkFoldOrder(f, foldReport);
  std::string permutationReport = "ppermute and all_to_all: not checked (accumulation)";
  if (f.accumulate == 1) checkPermutations(f, permutationReport);
  const int64_t global = step.globalDeviceCount();
  std::string meshReport = "tensor-parallel MLP: not checked (accumulation or an odd replica count)", meshLosses;
  Tree meshParams;
  if (f.accumulate == 1 && global % 2 == 0) {
    checkMesh(f, global, meshParams, meshLosses, meshReport);
    std::string transformerReport;
    checkMeshTransformer(f, global, meshParams, meshLosses, transformerReport);
    meshReport += "; " + transformerReport;
  }
  std::string why;
  const int threads = step.threadsPerReplica(&why);
  if (kBatch % global != 0) throw Error("the global batch of 24 does not split over " + std::to_string(global) + " devices");
  const int64_t begin = kBatch * process / processes, end = kBatch * (process + 1) / processes;
  std::string losses, reductions;
  int64_t reduced = 0;
  for (int s = 0; s < f.steps; ++s) {
    if (s == f.faultStep && process == f.faultProcess) {
      if (f.fault == "kill") raise(SIGKILL);
      if (f.fault == "stop") raise(SIGSTOP);
      if (f.fault == "hang")
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      if (f.fault == "flip") {  // one bit of one replica's copy of a parameter: the drift check must see it
        auto buffer = params.at("fc.weight").resident()->buffer(0);
        buffer.get()[5] ^= std::byte{0x10};
      }
    }
    Array y = Array::zeros(DType::i32, {kBatch});
    for (int64_t i = 0; i < kBatch; ++i) y.values<int32_t>()[i] = int32_t((i * 7 + s * 3) % 10);
    if (f.fault == "throw" && s == f.faultStep && process == f.faultProcess) y.values<int32_t>()[end - 1] = 99;
    auto [p2, s2, o2, loss, worst, biasMean, biasSum] =
        step(params, state, opt, rows(randomImages(s, dtype), begin, end), rows(y, begin, end));
    params = p2, state = s2, opt = o2;
    Array l = loss.array();
    losses.append(reinterpret_cast<const char*>(l.data()), l.bytes());
    for (const Tensor& t : {worst, biasMean, biasSum}) {
      const Array a = t.array();
      reductions.append(reinterpret_cast<const char*>(a.data()), a.bytes());
      reduced += a.numel();
    }
    if (!f.checkpoint.empty()) {
      processBarrier("before checkpoint " + std::to_string(s));
      if (process == 0) {
        io::Checkpoint c;
        for (const auto& [name, t] : params) c.tensors["params." + name] = t.array();
        c.metadata["step"] = std::to_string(s + 1);
        io::saveSafetensors(f.checkpoint, c);
      }
      processBarrier("after checkpoint " + std::to_string(s));
    }
  }
  std::string bytes, index;
  append(bytes, index, params, "params."), append(bytes, index, state, "state."), append(bytes, index, opt, "opt.");
  bytes += losses + reductions;
  index += "losses " + std::to_string(f.steps) + "\n" + "reductions " + std::to_string(reduced) + "\n";
  std::ofstream(f.out + "." + std::to_string(process), std::ios::binary) << bytes;
  if (!meshLosses.empty()) {  // the mesh check's state, compared across layouts of one mesh size
    std::string meshBytes, meshIndex;
    append(meshBytes, meshIndex, meshParams, "mesh.");
    std::ofstream(f.out + ".mesh." + std::to_string(process), std::ios::binary) << meshBytes + meshLosses;
  }
  if (process == 0) std::ofstream(f.out + ".index") << index;
  double last = dtype == DType::f32 ? double(reinterpret_cast<const float*>(losses.data())[f.steps - 1])
                                    : reinterpret_cast<const double*>(losses.data())[f.steps - 1];
  std::printf("process %d of %d: %d steps on %s (%lld replicas in all, %d threads per replica: %s), loss %.6f; %s\n",
              process, processes, f.steps, f.devices.c_str(), static_cast<long long>(global), threads, why.c_str(),
              last, (foldReport + "; " + permutationReport + "; " + meshReport).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int status = 0;
    std::optional<Flags> flags = parse(argc, argv, status);
    return flags ? run(*flags) : status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dist_train: %s\n", e.what());
    if (processCount() > 1) abortJob(std::string("dist_train: ") + e.what());
    return 1;
  }
}
