// One ResNet-18 training step (benchmarks/TrainStep.h: SGD with momentum on a synthetic batch)
// under pmap, its results as arrays for bit comparisons: the loss, then the new parameters,
// optimizer state and BatchNorm state in tree order.
#pragma once

#include <tuple>
#include <vector>

#include "benchmarks/TrainStep.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"

namespace spmd::testing {

// `options`' inAxes are set here (the step's: three replicated trees, a split batch). `steps`:
// steps run one after another on the same batch, each from the last one's results.
inline std::vector<Array> resnetStepOutputs(int64_t width, int64_t batch, uint64_t initSeed, PmapOptions options,
                                            int steps = 1) {
  auto model = models::resnet18({.width = width});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  auto [x, y] = bench::syntheticBatch(batch);
  options.inAxes = {replicated, replicated, replicated, split, split};
  auto step = pmap(bench::trainStep(*model, sgd), options);
  auto [params, state] = model->initialize(initSeed);
  Tree opt = sgd.init(params);
  auto [p, o, s, loss] = step(params, opt, state, x, y);
  for (int i = 1; i < steps; ++i) std::tie(p, o, s, loss) = step(p, o, s, x, y);
  std::vector<Array> out = {loss.array()};
  for (const Tree* tree : {&p, &o, &s})
    for (const auto& [name, t] : *tree) out.push_back(t.array());
  return out;
}

}  // namespace spmd::testing
