// The seeds' Flax CNN (seed 002) for 28x28 inputs, in NCHW: conv 3x3 (32, 'SAME' padding) ->
// relu -> avg_pool 2x2 -> conv 3x3 (64) -> relu -> avg_pool 2x2 -> flatten -> dense 256 ->
// relu -> dense 10 -> log_softmax. Weights LeCun normal, biases zero, as Flax initializes them.
// Parameter paths: conv1.weight, conv2.bias, fc1.weight, fc2.bias.
#pragma once

#include <memory>

#include "frontend/nn/Layers.h"

namespace spmd::models {

struct CnnConfig {
  int64_t inChannels = 1, imageSize = 28, numClasses = 10;
  int64_t channels1 = 32, channels2 = 64, hidden = 256;
};

std::unique_ptr<nn::Sequential> cnn(const CnnConfig& config = {});

}  // namespace spmd::models
