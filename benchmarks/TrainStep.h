// What the training-step benchmarks share: the ResNet-18 step they time (forward with train-mode
// BN, mean softmax cross-entropy, autodiff, SGD update, new BN statistics) and a fixed batch.
#pragma once

#include <tuple>
#include <utility>
#include <vector>

#include "frontend/spmd.h"

namespace bench {

// (params, opt, bn state, x, y) -> (new params, new opt, new bn state, loss); for jit or pmap.
// `compute` bf16: mixed precision (nn::ApplyOptions::compute, as the sample's --precision bf16).
inline auto trainStep(const spmd::nn::Module& model, const spmd::optim::Sgd& sgd, spmd::DType compute = spmd::DType::f32) {
  return [&model, &sgd, compute](const spmd::Tree& p, const spmd::Tree& o, const spmd::Tree& s,
                                 const spmd::Tensor& x, const spmd::Tensor& y) {
    auto [loss, grads, newState] = spmd::value_and_grad(
        [&](const spmd::Tree& q) {
          auto [logits, st] = model.apply(q, s, x, {.training = true, .compute = compute});
          return std::pair{spmd::mean(spmd::softmaxCrossEntropy(logits, y), {0}), st};
        },
        spmd::has_aux)(p);
    auto [newParams, newOpt] = sgd.update(p, grads, o);
    return std::tuple{newParams, newOpt, newState, loss};
  };
}

// Normal(1) images [batch, 1, 28, 28] (seed 1) and labels i % 10.
inline std::pair<spmd::Tensor, spmd::Tensor> syntheticBatch(int64_t batch) {
  spmd::Rng rng(1);
  spmd::Tensor x = spmd::init::normal(1.0)(rng, {batch, 1, 28, 28});
  std::vector<int32_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = static_cast<int32_t>(i % 10);
  return {x, spmd::Array::of<int32_t>({batch}, labels)};
}

// {bytes of all buffers, bytes of the planned arena (0: none)} of a compiled Program.
inline std::pair<size_t, size_t> programBytes(const spmd::runtime::Program& program) {
  size_t total = 0;
  for (const auto& buffer : program.buffers) total += buffer.bytes();
  return {total, program.arenaBytes};
}

}  // namespace bench
