// The layers CNNs are built from: Conv2d, Conv1d, Conv3d, ConvTranspose2d, ConvTranspose3d, BatchNorm2d, Linear, ReLU, Sigmoid, max and average pooling,
// global average pooling, LogSoftmax, Dropout, LayerNorm, Embedding, Flatten and Sequential. Parameter names follow PyTorch (weight, bias,
// running_mean, running_var) so checkpoints map one to one.
#pragma once

#include "frontend/Ops.h"
#include "frontend/Volume.h"
#include "frontend/nn/Module.h"

namespace spmd::nn {

// torch.nn.Conv2d's square form: the weight is [out, in / groups, kernel, kernel] (groups = in:
// depthwise), its taps `dilation` apart.
struct Conv2dConfig {
  int64_t in, out, kernel;
  int64_t stride = 1, padding = 0;
  bool bias = true;
  Initializer weightInit = init::normal(0.01);
  int64_t dilation = 1, groups = 1;
};

class Conv2d final : public Module {
 public:
  // Throws spmd::Error when groups does not divide in and out, or a size is not positive.
  Conv2d(std::string path, Conv2dConfig config);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  Conv2dConfig c_;
};

// torch.nn.Conv1d: x [N, in, L], the weight [out, in / groups, kernel] (spmd::conv1d); the
// configuration's fields are Conv2d's.
using Conv1dConfig = Conv2dConfig;
class Conv1d final : public Module {
 public:
  // Throws spmd::Error when groups does not divide in and out, or a size is not positive.
  Conv1d(std::string path, Conv1dConfig config);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  Conv2dConfig c_;
};

// torch.nn.Conv3d's cubic form: x [N, in, D, H, W], the weight [out, in / groups, kernel, kernel,
// kernel] (spmd::conv3d); the configuration's fields are Conv2d's, the same in every dimension.
using Conv3dConfig = Conv2dConfig;
class Conv3d final : public Module {
 public:
  // Throws spmd::Error when groups does not divide in and out, or a size is not positive.
  Conv3d(std::string path, Conv3dConfig config);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  Conv3dConfig c_;
};

// torch.nn.ConvTranspose2d's square form: x [N, in, H, W], the weight [in, out / groups, kernel,
// kernel] (spmd::convTranspose2d; outputPadding below the stride).
struct ConvTranspose2dConfig {
  int64_t in, out, kernel;
  int64_t stride = 1, padding = 0, outputPadding = 0;
  bool bias = true;
  Initializer weightInit = init::normal(0.01);
  int64_t dilation = 1, groups = 1;
};
class ConvTranspose2d final : public Module {
 public:
  // Throws spmd::Error when groups does not divide in and out, a size is not positive or
  // outputPadding is not below the stride.
  ConvTranspose2d(std::string path, ConvTranspose2dConfig config);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  ConvTranspose2dConfig c_;
};

// torch.nn.ConvTranspose3d's cubic form: x [N, in, D, H, W], the weight [in, out / groups, kernel,
// kernel, kernel] (spmd::convTranspose3d); the configuration's fields are ConvTranspose2d's, the
// same in every dimension.
using ConvTranspose3dConfig = ConvTranspose2dConfig;
class ConvTranspose3d final : public Module {
 public:
  // Throws spmd::Error when groups does not divide in and out, a size is not positive or
  // outputPadding is not below the stride.
  ConvTranspose3d(std::string path, ConvTranspose3dConfig config);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  ConvTranspose3dConfig c_;
};

// Batch normalization over (N, H, W) per channel. Training: batch statistics, and running
// statistics updated as PyTorch does (momentum 0.1, unbiased variance). Inference: running ones.
// With `axisName` (inside spmd::pmap), training statistics are cross-replica, as SyncBatchNorm:
// pmean of the per-replica mean and mean of squares; otherwise each replica uses its own batch.
// With a mask (ApplyOptions::mask) the statistics and the running statistics' update count the
// examples alone; a replica (per-replica statistics) without any keeps its running statistics.
class BatchNorm2d final : public Module {
 public:
  // Throws naming the layer unless channels >= 0, epsilon is positive and finite and momentum in [0, 1].
  BatchNorm2d(std::string path, int64_t channels, double epsilon = 1e-5, double momentum = 0.1,
              std::string axisName = "");
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  BatchNormResult crossReplica(const Tensor& x, const Tensor& scale, const Tensor& offset,
                               const Tensor& mask, Loc loc) const;

  int64_t channels_;
  double epsilon_, momentum_;
  std::string axisName_;
};

// y = x W^T + b over the last axis of x (any rank >= 2).
class Linear final : public Module {
 public:
  Linear(std::string path, int64_t in, int64_t out, Initializer weightInit = init::normal(0.01))
      : Module(std::move(path)), in_(in), out_(out), weightInit_(std::move(weightInit)) {}
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  int64_t in_, out_;
  Initializer weightInit_;
};

class ReLU final : public Elementwise<relu> {
  using Elementwise::Elementwise;
};

// Windowed pooling over [N, C, H, W] (spmd::maxPool2d / avgPool2d).
class MaxPool2d final : public Module {
 public:
  MaxPool2d(std::string path, Pool2dOptions options = {}) : Module(std::move(path)), options_(std::move(options)) {}
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return maxPool2d(x, options_, loc); }

 private:
  Pool2dOptions options_;
};

class AvgPool2d final : public Module {
 public:
  AvgPool2d(std::string path, Pool2dOptions options = {}) : Module(std::move(path)), options_(std::move(options)) {}
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return avgPool2d(x, options_, loc); }

 private:
  Pool2dOptions options_;
};

// Windowed pooling over [N, C, D, H, W] (spmd::maxPool3d / avgPool3d).
class MaxPool3d final : public Module {
 public:
  MaxPool3d(std::string path, Pool3dOptions options = {}) : Module(std::move(path)), options_(std::move(options)) {}
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return maxPool3d(x, options_, loc); }

 private:
  Pool3dOptions options_;
};

class AvgPool3d final : public Module {
 public:
  AvgPool3d(std::string path, Pool3dOptions options = {}) : Module(std::move(path)), options_(std::move(options)) {}
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return avgPool3d(x, options_, loc); }

 private:
  Pool3dOptions options_;
};

// log_softmax over the last axis (Flax's nn.log_softmax as a model's final layer).
class LogSoftmax final : public Module {
 public:
  using Module::Module;
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return logSoftmax(x, -1, loc); }
};

// Layer normalization over the last axis (spmd::layerNorm); weight ones, bias zeros.
class LayerNorm final : public Module {
 public:
  LayerNorm(std::string path, int64_t dim, double epsilon = 1e-5);  // throws unless dim >= 0, epsilon > 0 finite
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  int64_t dim_;
  double epsilon_;
};

// Group normalization of [N, C, ...] (spmd::groupNorm, torch.nn.GroupNorm(groups, channels)):
// weight ones, bias zeros, per channel.
class GroupNorm final : public Module {
 public:
  GroupNorm(std::string path, int64_t groups, int64_t channels, double epsilon = 1e-5);
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  int64_t groups_, channels_;
  double epsilon_;
};

// Token ids (i32, any shape) -> rows of a [count, dim] table "weight" (spmd::embedding).
class Embedding final : public Module {
 public:
  // Throws naming the layer unless count and dim are >= 0.
  Embedding(std::string path, int64_t count, int64_t dim, Initializer init = init::normal(1.0));
  void init(Rng& rng, Tree& params, Tree& state) const override;

 protected:
  Tensor forward(Context& ctx, const Tensor& ids, Loc loc) const override;

 private:
  int64_t count_, dim_;
  Initializer init_;
};

// Inverted dropout in training mode (spmd::random::dropout), the identity in inference. Draws
// from the key given to apply(), folded with a hash of the layer's path so that each Dropout
// layer has its own stream.
class Dropout final : public Module {
 public:
  Dropout(std::string path, double rate);  // throws unless 0 <= rate < 1
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  double rate_;
};

class Sigmoid final : public Elementwise<sigmoid> {
  using Elementwise::Elementwise;
};

// [N, C, H, W] -> [N, C]: mean over H and W.
class GlobalAvgPool final : public Module {
 public:
  using Module::Module;
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return mean(x, {2, 3}, loc); }
};

// [N, ...] -> [N, prod(...)]
class Flatten final : public Module {
 public:
  using Module::Module;
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override {
    return reshape(x, {x.dim(0), -1}, loc);
  }
};

// Children run in order; a child's path is "<path>.<name>" (name defaults to its index).
class Sequential : public Module {
 public:
  using Module::Module;
  template <typename Layer, typename... Args>
  Layer& addNamed(const std::string& name, Args&&... args) {
    auto layer = std::make_unique<Layer>(child(name), std::forward<Args>(args)...);
    Layer& ref = *layer;
    layers_.push_back(std::move(layer));
    return ref;
  }
  template <typename Layer, typename... Args>
  Layer& add(Args&&... args) {
    return addNamed<Layer>(std::to_string(layers_.size()), std::forward<Args>(args)...);
  }
  void init(Rng& rng, Tree& params, Tree& state) const override;
  size_t size() const { return layers_.size(); }

 protected:
  Tensor forward(Context& ctx, const Tensor& x, Loc loc) const override;

 private:
  std::vector<std::unique_ptr<Module>> layers_;
};

}  // namespace spmd::nn
