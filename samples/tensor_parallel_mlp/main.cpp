// A two-layer MLP trained tensor-parallel and data-parallel on a mesh (frontend/models/
// TensorParallelMlp.h: Megatron's column- then row-parallel matmuls over "model", the batch over
// "data", spmd::shardMap): it learns a fixed random teacher MLP's outputs from random inputs by
// SGD on the squared error, printing the loss. --check runs the unsharded MLP on one device beside
// it and stops (exit 1) when a loss or parameter differs by more than the dtype's tolerance.
//   tensor_parallel_mlp [--data N] [--model N] [--devices LIST] [--steps N] [--batch N]
//                       [--hidden N] [--lr X] [--dtype f32|f64] [--check] [--max-final-ratio X]
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <string>

#include "frontend/models/TensorParallelMlp.h"
#include "frontend/spmd.h"
#include "tools/cli/Cli.h"

namespace {

using spmd::Array;
using spmd::DType;
using spmd::Tensor;
using spmd::Tree;

struct Flags {
  int64_t data = 2, model = 2, steps = 100, batch = 64, in = 16, hidden = 64, out = 4;
  double lr = 0.05, maxFinalRatio = 0;
  std::string devices, dtype = "f32";
  bool check = false;
};

std::optional<Flags> parse(int argc, char** argv, int& status) {
  Flags f;
  spmd::cli::Flags app("tensor_parallel_mlp",
                       "Trains a two-layer MLP tensor-parallel over a data x model mesh (spmd::shardMap).");
  app.whole("--data", f.data, 1, 4096, "the mesh's data axis: replicas that split the batch");
  app.whole("--model", f.model, 1, 4096, "the mesh's model axis: replicas that split the hidden units");
  app.text("--devices", f.devices, "device list (default: cpu:<data * model>)", "LIST");
  app.whole("--steps", f.steps, 1, 100000000, "SGD steps");
  app.whole("--batch", f.batch, 1, int64_t(1) << 30, "global batch (a multiple of --data)");
  app.whole("--hidden", f.hidden, 1, int64_t(1) << 30, "hidden units (a multiple of --model)");
  app.number("--lr", f.lr, 1e-30, 1e30, "SGD's learning rate");
  app.oneOf("--dtype", f.dtype, {"f32", "f64"}, "parameters' and data's dtype");
  app.flag("--check", f.check, "run the unsharded MLP beside it and stop where they differ");
  app.number("--max-final-ratio", f.maxFinalRatio, 0, 1e30,
             "fail (exit 1) unless the last loss is at most this times the first (0: no check)");
  if (auto stop = app.parse(argc, argv)) {
    status = *stop;
    return std::nullopt;
  }
  if (f.devices.empty()) f.devices = "cpu:" + std::to_string(f.data * f.model);
  return f;
}

double valueAt(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f64 ? t.array().values<double>()[i] : double(t.array().values<float>()[i]);
}

Array randomInputs(int64_t rows, int64_t columns, DType dtype, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Array a = Array::zeros(dtype, {rows, columns});
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (dtype == DType::f64) a.values<double>()[i] = normal(rng);
    else a.values<float>()[i] = float(normal(rng));
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) try {
  int status = 0;
  std::optional<Flags> parsed = parse(argc, argv, status);
  if (!parsed) return status;
  const Flags& f = *parsed;
  const DType dtype = f.dtype == "f64" ? DType::f64 : DType::f32;
  const double tolerance = dtype == DType::f64 ? 1e-12 : 1e-4;
  spmd::Mesh mesh({{"data", f.data}, {"model", f.model}});
  auto step = spmd::models::tensorParallelMlp(mesh, f.lr, {.axisName = "mesh", .devices = f.devices, .name = "tp_mlp"});
  auto reference = spmd::jit(
      [&](const Tree& p, const Tensor& x, const Tensor& y) { return spmd::models::mlpStep(p, x, y, f.lr); },
      {.name = "mlp"});
  auto teacherForward = spmd::jit([](const Tree& p, const Tensor& x) {
    return spmd::matmul(spmd::relu(spmd::matmul(x, p.at("w1")) + p.at("b1")), p.at("w2")) + p.at("b2");
  });
  const Tree teacher = spmd::models::mlpInit(f.in, 32, f.out, dtype, 7);
  Tree params = spmd::models::mlpInit(f.in, f.hidden, f.out, dtype, 1), whole = params;
  std::mt19937_64 rng(3);
  std::printf("mesh %s on %s: %lld hidden units (%lld per replica), global batch %lld (%lld per replica)\n",
              mesh.describe().c_str(), f.devices.c_str(), (long long)f.hidden, (long long)(f.hidden / f.model),
              (long long)f.batch, (long long)(f.batch / f.data));
  double first = 0, last = 0;
  for (int64_t s = 0; s < f.steps; ++s) {
    Array x = randomInputs(f.batch, f.in, dtype, rng);
    Tensor y = teacherForward(teacher, x);
    auto [w1, b1, w2, b2, loss] = step(params.at("w1"), params.at("b1"), params.at("w2"), params.at("b2"), x, y);
    params = Tree();
    params.set("w1", w1), params.set("b1", b1), params.set("w2", w2), params.set("b2", b2);
    last = valueAt(loss, 0);
    if (s == 0) first = last;
    if (f.check) {
      auto [next, wholeLoss] = reference(whole, x, y);
      whole = next;
      if (std::abs(valueAt(wholeLoss, 0) - last) > tolerance * std::abs(valueAt(wholeLoss, 0))) {
        std::fprintf(stderr, "step %lld: loss %.17g, the unsharded MLP's %.17g\n", (long long)s, last,
                     valueAt(wholeLoss, 0));
        return 1;
      }
      for (const auto& [name, t] : whole)
        for (int64_t i = 0; i < t.numel(); ++i)
          if (std::abs(valueAt(params.at(name), i) - valueAt(t, i)) > tolerance * (1 + std::abs(valueAt(t, i)))) {
            std::fprintf(stderr, "step %lld: %s[%lld] is %.17g, the unsharded MLP's %.17g\n", (long long)s, name.c_str(),
                         (long long)i, valueAt(params.at(name), i), valueAt(t, i));
            return 1;
          }
    }
    if (s == 0 || (s + 1) % 10 == 0 || s + 1 == f.steps)
      std::printf("step %lld: loss %.6f%s\n", (long long)(s + 1), last, f.check ? " (the unsharded MLP's too)" : "");
  }
  if (f.maxFinalRatio > 0 && !(last <= f.maxFinalRatio * first)) {
    std::fprintf(stderr, "the loss went from %.6f to %.6f, not below %.3g of the first\n", first, last, f.maxFinalRatio);
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tensor_parallel_mlp: %s\n", e.what());
  return 1;
}
