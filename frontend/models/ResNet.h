// The seeds' ResNet-18 variant for 28x28 inputs: 3x3 stem with stride 1 and no max-pool, four
// stages of two residual blocks (64/128/256/512 channels at width 64), global average pool,
// linear classifier. Parameter paths: stem.conv.weight, stage2.0.conv1.weight, fc.bias, ...
#pragma once

#include <memory>
#include <string>

#include "frontend/nn/Layers.h"

namespace spmd::models {

// conv1 (3x3, stride s) -> bn1 -> relu -> conv2 (3x3) -> bn2, plus the input (through a 1x1
// conv3 with stride s when the shape changes), then relu.
class Residual final : public nn::Module {
 public:
  Residual(std::string path, int64_t in, int64_t out, int64_t stride, bool projection,
           const std::string& bnAxisName = "", bool checkpoint = false);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(nn::Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  nn::Conv2d conv1_, conv2_;
  nn::BatchNorm2d bn1_, bn2_;
  std::unique_ptr<nn::Conv2d> conv3_;
  bool checkpoint_ = false;  // the block is one spmd::checkpoint segment
};

struct ResNet18Config {
  int64_t inChannels = 1;
  int64_t numClasses = 10;
  int64_t width = 64;  // channels of the first stage; stages use width x {1, 2, 4, 8}
  // Empty: BatchNorm statistics per replica (DDP's default). An axis name (inside spmd::pmap):
  // cross-replica statistics over that axis (SyncBatchNorm).
  std::string bnAxisName = {};
  // Rematerialization: each residual block is one spmd::checkpoint segment, recomputed in the
  // backward pass from its input instead of keeping its activations (same bits, less memory).
  bool checkpointBlocks = false;
};

std::unique_ptr<nn::Sequential> resnet18(const ResNet18Config& config = {});

}  // namespace spmd::models
