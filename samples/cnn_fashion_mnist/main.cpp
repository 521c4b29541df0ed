// The seeds' Flax notebook (seed 002) in C++: its CNN (frontend/models/Cnn.h) trained with Adam
// on 8 emulated CPU devices, batches laid out as the notebook does ([steps, devices,
// local_batch, ...], each step's slice stacked on the device axis), the batch's summed
// cross-entropy as the loss, gradients and loss averaged over devices by the compiler. Prints
// the summed loss per epoch, as the notebook, and the test accuracy.
//   cnn_fashion_mnist [--epochs N] [--batch N] [--lr X] [--devices LIST] [--train-limit N]
//                     [--test-limit N] [--seed S] [--min-accuracy X]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "frontend/data/FashionMnist.h"
#include "frontend/models/Cnn.h"
#include "frontend/spmd.h"
#include "tools/cli/Cli.h"

namespace {

using spmd::Array;
using spmd::Tensor;
using spmd::Tree;

struct Flags {
  int64_t epochs = 1, batch = 256, trainLimit = 0, testLimit = 0;
  double lr = 1e-3, minAccuracy = 0;
  std::string devices = "cpu:8";
  uint64_t seed = 42;
};

// The flags through CLI11 (tools/cli); nullopt with `status` set when the program should stop.
std::optional<Flags> parse(int argc, char** argv, int& status) {
  Flags f;
  spmd::cli::Flags app("cnn_fashion_mnist",
                       "Trains the seeds' Flax CNN on Fashion-MNIST with Adam, data-parallel (spmd::pmap).");
  app.whole("--epochs", f.epochs, 1, 1000000, "epochs to train");
  app.whole("--batch", f.batch, 1, int64_t(1) << 30, "global batch, split over the devices");
  app.number("--lr", f.lr, 1e-30, 1e30,
             "Adam's learning rate (with the notebook's 0.2 this model stays at chance accuracy)");
  app.text("--devices", f.devices, "device list", "LIST");
  app.whole("--train-limit", f.trainLimit, 0, int64_t(1) << 40, "use the first N training images (0: all)");
  app.whole("--test-limit", f.testLimit, 0, int64_t(1) << 40, "use the first N test images (0: all)");
  app.whole("--seed", f.seed, uint64_t(INT64_MAX), "initialization seed");
  app.number("--min-accuracy", f.minAccuracy, 0, 1, "fail (exit 1) when the final test accuracy is lower");
  if (auto stop = app.parse(argc, argv)) {
    status = *stop;
    return std::nullopt;
  }
  return f;
}

// Rows [start, start + rows) of `column`, as an array of `shape`.
Array rows(const Array& column, int64_t start, int64_t count, spmd::Shape shape) {
  Array out = Array::zeros(column.dtype, shape);
  size_t rowBytes = column.bytes() / size_t(column.shape[0]);
  std::memcpy(out.data(), static_cast<const std::byte*>(column.data()) + size_t(start) * rowBytes,
              size_t(count) * rowBytes);
  return out;
}

}  // namespace

int main(int argc, char** argv) try {
  int status = 0;
  std::optional<Flags> parsed = parse(argc, argv, status);
  if (!parsed) return status;
  const Flags& f = *parsed;
  spmd::data::Dataset train = spmd::data::loadFashionMnist("train", f.trainLimit);
  spmd::data::Dataset test = spmd::data::loadFashionMnist("test", f.testLimit);
  auto model = spmd::models::cnn();
  auto [params, state] = model->initialize(f.seed);
  spmd::optim::Adam adam({.learningRate = f.lr});
  Tree opt = adam.init(params);

  auto update = spmd::pmap(
      [&](const Tree& p, const Tree& o, const Tensor& xs, const Tensor& ys) {
        auto [loss, grads] = spmd::value_and_grad([&](const Tree& q) {
          Tensor logProbs = model->apply(q, state, xs, true).first;
          return spmd::sum(spmd::softmaxCrossEntropy(logProbs, ys), {0});
        })(p);
        auto [newParams, newOpt] = adam.update(p, grads, o);
        return std::tuple{newParams, newOpt, loss};
      },
      {.inAxes = {spmd::replicated, spmd::replicated, 0, 0}, .devices = f.devices, .name = "update",
       .donateArguments = {0, 1}});
  auto predict = spmd::jit(
      [&](const Tree& p, const Tensor& xs) { return spmd::argmax(model->apply(p, state, xs, false).first, 1); },
      {.name = "predict"});

  const int64_t devices = update.globalDeviceCount();
  if (f.batch % devices != 0)
    throw spmd::Error("--batch " + std::to_string(f.batch) + " does not split over " + std::to_string(devices) +
                      " devices; use a multiple of " + std::to_string(devices));
  const int64_t local = f.batch / devices, steps = train.size() / f.batch;  // the notebook drops the rest
  if (steps == 0)
    throw spmd::Error("--batch " + std::to_string(f.batch) + " is larger than the " + std::to_string(train.size()) +
                      " training images");
  std::printf("seeds' CNN (%lld parameters) on Fashion-MNIST: %lld steps of [%lld devices, %lld local] "
              "per epoch on %s, Adam lr %g\n",
              static_cast<long long>(params.numElements()), static_cast<long long>(steps),
              static_cast<long long>(devices), static_cast<long long>(local), f.devices.c_str(), f.lr);

  auto accuracy = [&]() {
    int64_t correct = 0;
    for (int64_t start = 0; start < test.size(); start += 1000) {
      int64_t n = std::min<int64_t>(1000, test.size() - start);
      Tensor predicted = predict(params, rows(test.images(), start, n, {n, 1, 28, 28}));
      auto p = predicted.array().values<int32_t>();
      auto labels = test.labels().values<int32_t>();
      for (int64_t i = 0; i < n; ++i) correct += p[i] == labels[start + i];
    }
    return double(correct) / double(test.size());
  };

  double lastAccuracy = 0;
  for (int64_t epoch = 0; epoch < f.epochs; ++epoch) {
    auto begin = std::chrono::steady_clock::now();
    double lossSum = 0;
    for (int64_t s = 0; s < steps; ++s) {
      Array xs = rows(train.images(), s * f.batch, f.batch, {devices, local, 1, 28, 28});
      Array ys = rows(train.labels(), s * f.batch, f.batch, {devices, local});
      auto [newParams, newOpt, loss] = update(params, opt, xs, ys);
      params = std::move(newParams);
      opt = std::move(newOpt);
      lossSum += loss.array().values<float>()[0];
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    lastAccuracy = accuracy();
    std::printf("epoch %lld: loss %.3f, test accuracy %.4f (%lld images), %.1f s, %.0f images/s\n",
                static_cast<long long>(epoch + 1), lossSum, lastAccuracy, static_cast<long long>(test.size()),
                seconds, double(steps * f.batch) / seconds);
  }
  if (lastAccuracy < f.minAccuracy) {
    std::fprintf(stderr, "cnn_fashion_mnist: test accuracy %.4f is below --min-accuracy %g\n", lastAccuracy,
                 f.minAccuracy);
    return 1;
  }
  return 0;
} catch (const spmd::Error& e) {
  std::fprintf(stderr, "cnn_fashion_mnist: error: %s\n", e.what());
  return 1;
}
