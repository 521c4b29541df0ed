// The seeds' small CNNs for 28x28 inputs. The Flax CNN (seed 002), in NCHW: conv 3x3 (32, 'SAME' padding) ->
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

// The LeNet variant d2l's "Training on Multiple GPUs" chapter writes from scratch (the seeds'
// multi-GPU texts point to it): conv 3x3 (20) -> relu -> avg_pool 2x2 -> conv 5x5 (50) -> relu
// -> avg_pool 2x2 (9x9 -> 4x4: the last row and column are dropped) -> flatten (800) -> dense 128
// -> relu -> dense 10 (logits). Weights normal(0.01), biases zero, as there. Parameters conv1,
// conv2, fc1, fc2.
std::unique_ptr<nn::Sequential> lenet(int64_t numClasses = 10);

}  // namespace spmd::models
