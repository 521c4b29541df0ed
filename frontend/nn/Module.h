// nn::Module: a named layer in the Flax style. Parameters and state live in Trees outside the
// module; init() fills them under the module's dotted path, apply() reads them and records ops.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/Init.h"
#include "frontend/Tree.h"

namespace spmd::nn {

// What a forward pass reads and writes: parameters, state (BN running statistics), the new
// state a training-mode pass produces, and the random key of a training pass (empty if none).
struct Context {
  const Tree& params;
  const Tree& state;
  bool training = true;
  Tree newState;
  Tensor rng;
  Tensor mask;  // [N] 1 for an example, 0 for a padding row (ApplyOptions::mask)
  DType compute = DType::f32;  // ApplyOptions::compute
  Tree* intermediates = nullptr;  // ApplyOptions::intermediates
  // `t` (a parameter of a convolution or matmul, an activation) in bf16 when the compute dtype is
  // bf16; else, and for i32, as it is.
  Tensor toCompute(const Tensor& t, Loc loc) const;
};

// How apply() runs the model.
struct ApplyOptions {
  bool training = false;
  Tensor rng = {};  // random key (spmd::random) for the layers that draw random numbers (Dropout)
  // [N] 1 for an example, 0 for a row that pads the batch to its compiled shape: BatchNorm takes
  // its statistics over the examples alone, so the padded batch normalizes as the unpadded one.
  Tensor mask = {};
  // Mixed precision, as torch.autocast(dtype=...) and JAX's policies: with bf16, convolutions
  // and matmuls take bf16 inputs (their f32 parameters converted as they are read: f32 master
  // weights, f32 gradients), activations flow in bf16, BatchNorm and LayerNorm compute in their
  // parameters' dtype (f32 statistics) and return bf16, and apply() returns the output in f32
  // (f64 for an f64 input), so that the loss is f32. bf16 ops compute in f32 between bf16
  // roundings (passes/WidenBf16.cpp). f32, the default, converts nothing.
  DType compute = DType::f32;
  // When set, apply() stores every layer's output here under the layer's path ("stem.bn",
  // "stage1.0", ...; the whole model's under "output"), as Flax's capture_intermediates: return
  // the Tree from the traced function to read activations (a ReLU's input is the output of the
  // layer before it). Cleared first. Capturing makes them outputs of the compiled step, so it
  // keeps them alive; it changes no value.
  Tree* intermediates = nullptr;
};

class Module {
 public:
  explicit Module(std::string path) : path_(std::move(path)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& path() const { return path_; }
  virtual void init(Rng& rng, Tree& params, Tree& state) const = 0;
  // Records the layer's ops at the caller's line, with the layer's path as the op scope.
  Tensor operator()(Context& ctx, const Tensor& x, Loc loc = Loc::current()) const;

  // Flax-style entry point: fresh parameters and state.
  std::pair<Tree, Tree> initialize(uint64_t seed) const;
  // Runs the model; returns the output and (in training mode) the updated state.
  std::pair<Tensor, Tree> apply(const Tree& params, const Tree& state, const Tensor& x,
                                bool training, Loc loc = Loc::current()) const;
  // With a random key (spmd::random) for the layers that draw random numbers (Dropout).
  std::pair<Tensor, Tree> apply(const Tree& params, const Tree& state, const Tensor& x,
                                bool training, const Tensor& rngKey, Loc loc = Loc::current()) const;
  std::pair<Tensor, Tree> apply(const Tree& params, const Tree& state, const Tensor& x,
                                const ApplyOptions& options, Loc loc = Loc::current()) const;

 protected:
  virtual Tensor forward(Context& ctx, const Tensor& x, Loc loc) const = 0;
  // "<path>.<leaf>", or just leaf for the root.
  std::string key(const std::string& leaf) const;
  std::string child(const std::string& name) const { return key(name); }

 private:
  std::string path_;
};

// A parameter-free layer applying `fn(x, loc)` (nn::ReLU, nn::GELU, ...: each class names one).
template <Tensor (*fn)(const Tensor&, Loc)>
class Elementwise : public Module {
 public:
  using Module::Module;
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return fn(x, loc); }
};

// A parameter-free layer applying `fn(x, value, loc)` with the value it was made with
// (nn::LeakyReLU's slope, nn::ELU's alpha).
template <Tensor (*fn)(const Tensor&, double, Loc)>
class ElementwiseWith : public Module {
 public:
  ElementwiseWith(std::string path, double value) : Module(std::move(path)), value_(value) {}
  void init(Rng&, Tree&, Tree&) const override {}

 protected:
  Tensor forward(Context&, const Tensor& x, Loc loc) const override { return fn(x, value_, loc); }

 private:
  double value_;
};

}  // namespace spmd::nn
