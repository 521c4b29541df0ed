// ResNet-18 (seeds' variant): Residual block and model assembly.
#include "frontend/models/ResNet.h"

#include "frontend/Remat.h"

namespace spmd::models {

Residual::Residual(std::string path, int64_t in, int64_t out, int64_t stride, bool projection,
                   const std::string& bnAxisName, bool checkpoint)
    : nn::Module(std::move(path)),
      conv1_(child("conv1"), {.in = in, .out = out, .kernel = 3, .stride = stride, .padding = 1}),
      conv2_(child("conv2"), {.in = out, .out = out, .kernel = 3, .stride = 1, .padding = 1}),
      bn1_(child("bn1"), out, 1e-5, 0.1, bnAxisName),
      bn2_(child("bn2"), out, 1e-5, 0.1, bnAxisName),
      checkpoint_(checkpoint) {
  if (projection)
    conv3_ = std::make_unique<nn::Conv2d>(
        child("conv3"), nn::Conv2dConfig{.in = in, .out = out, .kernel = 1, .stride = stride});
}

void Residual::init(Rng& rng, Tree& params, Tree& state) const {
  conv1_.init(rng, params, state);
  bn1_.init(rng, params, state);
  conv2_.init(rng, params, state);
  bn2_.init(rng, params, state);
  if (conv3_) conv3_->init(rng, params, state);
}

Tensor Residual::forward(nn::Context& ctx, const Tensor& x, Loc loc) const {
  auto block = [&](const Tensor& in) {
    Tensor y = relu(bn1_(ctx, conv1_(ctx, in, loc), loc), loc);
    y = bn2_(ctx, conv2_(ctx, y, loc), loc);
    Tensor shortcut = conv3_ ? (*conv3_)(ctx, in, loc) : in;
    return relu(add(y, shortcut, loc), loc);
  };
  return checkpoint_ ? spmd::checkpoint(block, loc)(x) : block(x);
}

std::unique_ptr<nn::Sequential> resnet18(const ResNet18Config& config) {
  auto net = std::make_unique<nn::Sequential>("");
  auto& stem = net->addNamed<nn::Sequential>("stem");
  int64_t w = config.width;
  stem.addNamed<nn::Conv2d>(
      "conv", nn::Conv2dConfig{.in = config.inChannels, .out = w, .kernel = 3, .padding = 1});
  stem.addNamed<nn::BatchNorm2d>("bn", w, 1e-5, 0.1, config.bnAxisName);
  stem.addNamed<nn::ReLU>("relu");
  int64_t in = w;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t out = w << stage;
    auto& blocks = net->addNamed<nn::Sequential>("stage" + std::to_string(stage + 1));
    bool first = stage == 0;
    blocks.add<Residual>(in, out, first ? 1 : 2, !first, config.bnAxisName, config.checkpointBlocks);
    blocks.add<Residual>(out, out, 1, false, config.bnAxisName, config.checkpointBlocks);
    in = out;
  }
  net->addNamed<nn::GlobalAvgPool>("pool");
  net->addNamed<nn::Flatten>("flatten");
  net->addNamed<nn::Linear>("fc", in, config.numClasses);
  return net;
}

}  // namespace spmd::models
