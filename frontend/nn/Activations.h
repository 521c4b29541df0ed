// Parameter-free layers beyond ReLU and Sigmoid (nn/Layers.h), as torch.nn's: the activations
// GELU, SiLU, Tanh, Softplus, Mish, LeakyReLU and ELU, and nearest Upsample (the functions of
// frontend/Ops.h and frontend/Composed.h), for Sequential models.
#pragma once

#include <string>
#include <utility>

#include "frontend/Composed.h"
#include "frontend/Ops.h"
#include "frontend/nn/Module.h"

namespace spmd::nn {

class GELU final : public Elementwise<gelu> {
  using Elementwise::Elementwise;
};
class SiLU final : public Elementwise<silu> {
  using Elementwise::Elementwise;
};
class Tanh final : public Elementwise<tanh> {
  using Elementwise::Elementwise;
};
class Softplus final : public Elementwise<softplus> {
  using Elementwise::Elementwise;
};
class Mish final : public Elementwise<mish> {
  using Elementwise::Elementwise;
};

// torch.nn.LeakyReLU(negative_slope), default 0.01.
class LeakyReLU final : public ElementwiseWith<leakyRelu> {
 public:
  explicit LeakyReLU(std::string path, double slope = 0.01) : ElementwiseWith(std::move(path), slope) {}
};

// torch.nn.ELU(alpha), default 1.
class ELU final : public ElementwiseWith<elu> {
 public:
  explicit ELU(std::string path, double alpha = 1.0) : ElementwiseWith(std::move(path), alpha) {}
};

// torch.nn.Upsample(scale_factor, mode="nearest") on [N, C, H, W], one whole factor for both axes.
class Upsample final : public Module {
 public:
  explicit Upsample(std::string path, int64_t scale = 2) : Module(std::move(path)), scale_(scale) {}
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return upsampleNearest2d(x, scale_, scale_, loc); }

 private:
  int64_t scale_;
};

}  // namespace spmd::nn
