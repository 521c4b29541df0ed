// Conv2d, BatchNorm2d, Linear, LayerNorm, Embedding, Dropout and Sequential: parameter creation
// and forward ops.
#include "frontend/nn/Layers.h"

#include <cmath>

#include "frontend/Collectives.h"
#include "frontend/Random.h"
#include "frontend/Trace.h"

namespace spmd::nn {

namespace {

// A convolution layer's configuration, checked when the layer is made (`kind`: "Conv2d").
template <class Config>
void checkConvConfig(const char* kind, const std::string& path, const Config& c) {
  const std::string at = std::string("nn::") + kind + " '" + path + "' (in " + std::to_string(c.in) + ", out " +
                         std::to_string(c.out) + ", kernel " + std::to_string(c.kernel) + ", groups " +
                         std::to_string(c.groups) + "): ";
  if (c.in < 1 || c.out < 1 || c.kernel < 1 || c.stride < 1 || c.padding < 0 || c.dilation < 1)
    throw Error(at + "in, out, kernel, stride and dilation must be positive and padding non-negative");
  if (c.groups < 1 || c.in % c.groups != 0 || c.out % c.groups != 0)
    throw Error(at + "groups must be positive and divide both in and out (groups = in is a depthwise convolution)");
}

// The transposed layers' outputPadding, below the stride (`kind`: "ConvTranspose2d").
void checkOutputPadding(const char* kind, const std::string& path, const ConvTranspose2dConfig& c) {
  if (c.outputPadding < 0 || c.outputPadding >= c.stride)
    throw Error(std::string("nn::") + kind + " '" + path + "': outputPadding (" + std::to_string(c.outputPadding) +
                ") must be non-negative and smaller than the stride (" + std::to_string(c.stride) + ")");
}

}  // namespace

Conv2d::Conv2d(std::string path, Conv2dConfig config) : Module(std::move(path)), c_(std::move(config)) {
  checkConvConfig("Conv2d", this->path(), c_);
}

ConvTranspose2d::ConvTranspose2d(std::string path, ConvTranspose2dConfig config)
    : Module(std::move(path)), c_(std::move(config)) {
  checkConvConfig("ConvTranspose2d", this->path(), c_);
  checkOutputPadding("ConvTranspose2d", this->path(), c_);
}

void ConvTranspose2d::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), c_.weightInit(rng, {c_.in, c_.out / c_.groups, c_.kernel, c_.kernel}));
  if (c_.bias) params.set(key("bias"), init::zeros()(rng, {c_.out}));
}

Tensor ConvTranspose2d::forward(Context& ctx, const Tensor& x, Loc loc) const {
  Tensor bias = c_.bias ? ctx.toCompute(ctx.params.at(key("bias"), loc), loc) : Tensor();
  return convTranspose2d(ctx.toCompute(x, loc), ctx.toCompute(ctx.params.at(key("weight"), loc), loc), bias,
                         {{c_.stride, c_.stride},
                          {c_.padding, c_.padding},
                          {c_.outputPadding, c_.outputPadding},
                          {c_.dilation, c_.dilation},
                          c_.groups},
                         loc);
}

ConvTranspose3d::ConvTranspose3d(std::string path, ConvTranspose3dConfig config)
    : Module(std::move(path)), c_(std::move(config)) {
  checkConvConfig("ConvTranspose3d", this->path(), c_);
  checkOutputPadding("ConvTranspose3d", this->path(), c_);
}

void ConvTranspose3d::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), c_.weightInit(rng, {c_.in, c_.out / c_.groups, c_.kernel, c_.kernel, c_.kernel}));
  if (c_.bias) params.set(key("bias"), init::zeros()(rng, {c_.out}));
}

Tensor ConvTranspose3d::forward(Context& ctx, const Tensor& x, Loc loc) const {
  Tensor bias = c_.bias ? ctx.toCompute(ctx.params.at(key("bias"), loc), loc) : Tensor();
  const int64_t s = c_.stride, p = c_.padding, op = c_.outputPadding, d = c_.dilation;
  return convTranspose3d(ctx.toCompute(x, loc), ctx.toCompute(ctx.params.at(key("weight"), loc), loc), bias,
                         {{s, s, s}, {p, p, p}, {op, op, op}, {d, d, d}, c_.groups}, loc);
}

Conv1d::Conv1d(std::string path, Conv1dConfig config) : Module(std::move(path)), c_(std::move(config)) {
  checkConvConfig("Conv1d", this->path(), c_);
}

void Conv1d::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), c_.weightInit(rng, {c_.out, c_.in / c_.groups, c_.kernel}));
  if (c_.bias) params.set(key("bias"), init::zeros()(rng, {c_.out}));
}

Tensor Conv1d::forward(Context& ctx, const Tensor& x, Loc loc) const {
  Tensor bias = c_.bias ? ctx.toCompute(ctx.params.at(key("bias"), loc), loc) : Tensor();
  return conv1d(ctx.toCompute(x, loc), ctx.toCompute(ctx.params.at(key("weight"), loc), loc), bias,
                {c_.stride, c_.padding, c_.dilation, c_.groups}, loc);
}

Conv3d::Conv3d(std::string path, Conv3dConfig config) : Module(std::move(path)), c_(std::move(config)) {
  checkConvConfig("Conv3d", this->path(), c_);
}

void Conv3d::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), c_.weightInit(rng, {c_.out, c_.in / c_.groups, c_.kernel, c_.kernel, c_.kernel}));
  if (c_.bias) params.set(key("bias"), init::zeros()(rng, {c_.out}));
}

Tensor Conv3d::forward(Context& ctx, const Tensor& x, Loc loc) const {
  Tensor bias = c_.bias ? ctx.toCompute(ctx.params.at(key("bias"), loc), loc) : Tensor();
  const int64_t k = c_.stride, p = c_.padding, d = c_.dilation;
  return conv3d(ctx.toCompute(x, loc), ctx.toCompute(ctx.params.at(key("weight"), loc), loc), bias,
                {{k, k, k}, {p, p, p}, {d, d, d}, c_.groups}, loc);
}

void Conv2d::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), c_.weightInit(rng, {c_.out, c_.in / c_.groups, c_.kernel, c_.kernel}));
  if (c_.bias) params.set(key("bias"), init::zeros()(rng, {c_.out}));
}

Tensor Conv2d::forward(Context& ctx, const Tensor& x, Loc loc) const {
  Tensor bias = c_.bias ? ctx.toCompute(ctx.params.at(key("bias"), loc), loc) : Tensor();
  return conv2d(ctx.toCompute(x, loc), ctx.toCompute(ctx.params.at(key("weight"), loc), loc), bias,
                {{c_.stride, c_.stride}, {c_.padding, c_.padding}, {c_.dilation, c_.dilation}, c_.groups}, loc);
}

BatchNorm2d::BatchNorm2d(std::string path, int64_t channels, double epsilon, double momentum, std::string axisName)
    : Module(std::move(path)), channels_(channels), epsilon_(epsilon), momentum_(momentum), axisName_(std::move(axisName)) {
  if (channels < 0 || !(epsilon > 0) || !std::isfinite(epsilon) || !(momentum >= 0 && momentum <= 1))
    throw Error("nn::BatchNorm2d '" + this->path() + "' (channels " + std::to_string(channels) + ", epsilon " +
                std::to_string(epsilon) + ", momentum " + std::to_string(momentum) +
                "): channels must be >= 0, epsilon positive and finite, momentum in [0, 1]");
}

void BatchNorm2d::init(Rng& rng, Tree& params, Tree& state) const {
  params.set(key("weight"), init::ones()(rng, {channels_}));
  params.set(key("bias"), init::zeros()(rng, {channels_}));
  state.set(key("running_mean"), init::zeros()(rng, {channels_}));
  state.set(key("running_var"), init::ones()(rng, {channels_}));
}

Tensor BatchNorm2d::forward(Context& ctx, const Tensor& x, Loc loc) const {
  if (x.rank() != 4 || x.dim(1) != channels_)
    throw Error(detail::where(loc) + ": " + path() + " (BatchNorm2d over " +
                std::to_string(channels_) + " channels) expects [N, " +
                std::to_string(channels_) + ", H, W], got " + x.typeString());
  const Tensor &scale = ctx.params.at(key("weight"), loc), &offset = ctx.params.at(key("bias"), loc);
  if (x.dtype() == DType::bf16 && scale.dtype() != DType::bf16)  // mixed precision: statistics in f32
    return cast(forward(ctx, cast(x, scale.dtype(), loc), loc), x.dtype(), loc);
  const Tensor &runningMean = ctx.state.at(key("running_mean"), loc),
               &runningVar = ctx.state.at(key("running_var"), loc);
  if (!ctx.training)
    return batchNormInfer(x, scale, offset, runningMean, runningVar, epsilon_, loc);
  // The mask in the activations' dtype (the loader's is f32).
  const Tensor mask = ctx.mask.defined() && ctx.mask.dtype() != x.dtype() ? cast(ctx.mask, x.dtype(), loc) : ctx.mask;
  // Cross-replica statistics count the examples of every replica.
  BatchNormResult r = axisName_.empty() ? batchNormTrain(x, scale, offset, epsilon_, mask, loc)
                                        : crossReplica(x, scale, offset, mask, loc);
  const double valuesPerExample = double(x.numel() / (x.dim(0) * channels_));
  if (mask.defined()) {
    // The count is data: the examples of this batch (of every replica, cross-replica).
    Tensor count = mul(sum(mask, {0}, loc), valuesPerExample, loc);
    if (!axisName_.empty()) count = psum(count, axisName_, loc);
    Tensor one = fill(count, 1.0, loc);
    Tensor rate = mul(minimum(count, one, loc), momentum_, loc);  // 0 without any example: no update
    Tensor unbias = div(count, maximum(add(count, -1.0, loc), one, loc), loc);  // count / (count - 1), 1 for 1
    auto blend = [&](const Tensor& running, const Tensor& batch, const Tensor& batchScale) {
      return add(mul(running, sub(one, rate, loc), loc), mul(batch, mul(rate, batchScale, loc), loc), loc);
    };
    ctx.newState.set(key("running_mean"), blend(runningMean, r.mean, one));
    ctx.newState.set(key("running_var"), blend(runningVar, r.variance, unbias));
    return r.y;
  }
  double count = double(x.dim(0)) * valuesPerExample *
                 double(axisName_.empty() ? 1 : axisSize(axisName_, loc));
  double unbias = count > 1 ? count / (count - 1) : 1.0;
  auto blend = [&](const Tensor& running, const Tensor& batch, double batchScale) {
    return add(mul(running, 1.0 - momentum_, loc), mul(batch, momentum_ * batchScale, loc), loc);
  };
  ctx.newState.set(key("running_mean"), blend(runningMean, r.mean, 1.0));
  ctx.newState.set(key("running_var"), blend(runningVar, r.variance, unbias));
  return r.y;
}

// SyncBatchNorm: statistics over the batch of every replica (equal local batches), from one
// combined pmean of the per-replica mean and mean of squares. With a mask, from one psum of the
// weighted sums and the count, so replicas with fewer examples weigh less.
BatchNormResult BatchNorm2d::crossReplica(const Tensor& x, const Tensor& scale,
                                          const Tensor& offset, const Tensor& mask, Loc loc) const {
  Tensor batchMean, meanOfSquares;
  if (mask.defined()) {
    Tensor weights = reshape(mask, {x.dim(0), 1, 1, 1}, loc);
    Tensor weighted = mul(x, weights, loc);
    std::vector<Tensor> sums = psum({sum(weighted, {0, 2, 3}, loc), sum(mul(weighted, x, loc), {0, 2, 3}, loc),
                                     mul(sum(mask, {0}, loc), double(x.dim(2) * x.dim(3)), loc)},
                                    axisName_, loc);
    batchMean = div(sums[0], sums[2], loc);
    meanOfSquares = div(sums[1], sums[2], loc);
  } else {
    std::vector<Tensor> stats = pmean({mean(x, {0, 2, 3}, loc), mean(mul(x, x, loc), {0, 2, 3}, loc)},
                                      axisName_, loc);
    batchMean = stats[0], meanOfSquares = stats[1];
  }
  Tensor variance = sub(meanOfSquares, mul(batchMean, batchMean, loc), loc);
  Tensor inverse = div(fill(variance, 1.0, loc), sqrt(add(variance, epsilon_, loc), loc), loc);
  auto perChannel = [&](const Tensor& v) { return reshape(v, {1, channels_, 1, 1}, loc); };
  Tensor y = mul(sub(x, perChannel(batchMean), loc), perChannel(mul(inverse, scale, loc)), loc);
  return {add(y, perChannel(offset), loc), batchMean, variance};
}

void Linear::init(Rng& rng, Tree& params, Tree&) const {
  if (in_ < 0 || out_ < 0)
    throw Error("nn::Linear '" + path() + "' (in " + std::to_string(in_) + ", out " + std::to_string(out_) +
                "): in and out must be non-negative");
  params.set(key("weight"), weightInit_(rng, {out_, in_}));
  params.set(key("bias"), init::zeros()(rng, {out_}));
}

Tensor Linear::forward(Context& ctx, const Tensor& x, Loc loc) const {
  if (x.rank() > 2) {  // [..., in] -> [..., out], as torch.nn.Linear: the rows are all leading dims
    Shape out = x.shape();
    out.back() = out_;
    return reshape(forward(ctx, reshape(x, {-1, x.shape().back()}, loc), loc), out, loc);
  }
  return matmul(ctx.toCompute(x, loc), ctx.toCompute(ctx.params.at(key("weight"), loc), loc),
                ctx.toCompute(ctx.params.at(key("bias"), loc), loc),
                {.transposeLhs = false, .transposeRhs = true}, loc);
}

LayerNorm::LayerNorm(std::string path, int64_t dim, double epsilon) : Module(std::move(path)), dim_(dim), epsilon_(epsilon) {
  if (dim < 0 || !(epsilon > 0) || !std::isfinite(epsilon))
    throw Error("nn::LayerNorm '" + this->path() + "' (dim " + std::to_string(dim) + ", epsilon " +
                std::to_string(epsilon) + "): dim must be >= 0 and epsilon positive and finite");
}

void LayerNorm::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), init::ones()(rng, {dim_}));
  params.set(key("bias"), init::zeros()(rng, {dim_}));
}

Tensor LayerNorm::forward(Context& ctx, const Tensor& x, Loc loc) const {
  const Tensor &scale = ctx.params.at(key("weight"), loc), &offset = ctx.params.at(key("bias"), loc);
  if (x.dtype() == DType::bf16 && scale.dtype() != DType::bf16)  // mixed precision: statistics in f32
    return cast(layerNorm(cast(x, scale.dtype(), loc), scale, offset, epsilon_, loc), x.dtype(), loc);
  return layerNorm(x, scale, offset, epsilon_, loc);
}

GroupNorm::GroupNorm(std::string path, int64_t groups, int64_t channels, double epsilon)
    : Module(std::move(path)), groups_(groups), channels_(channels), epsilon_(epsilon) {
  if (groups < 1 || channels < 1 || channels % groups != 0)
    throw Error("nn::GroupNorm '" + this->path() + "': groups (" + std::to_string(groups) +
                ") must be positive and divide the channels (" + std::to_string(channels) + ")");
}

void GroupNorm::init(Rng& rng, Tree& params, Tree&) const {
  params.set(key("weight"), init::ones()(rng, {channels_}));
  params.set(key("bias"), init::zeros()(rng, {channels_}));
}

Tensor GroupNorm::forward(Context& ctx, const Tensor& x, Loc loc) const {
  const Tensor &scale = ctx.params.at(key("weight"), loc), &offset = ctx.params.at(key("bias"), loc);
  if (x.dtype() == DType::bf16 && scale.dtype() != DType::bf16)  // mixed precision: statistics in f32
    return cast(groupNorm(cast(x, scale.dtype(), loc), groups_, scale, offset, epsilon_, loc), x.dtype(), loc);
  return groupNorm(x, groups_, scale, offset, epsilon_, loc);
}

Embedding::Embedding(std::string path, int64_t count, int64_t dim, Initializer init)
    : Module(std::move(path)), count_(count), dim_(dim), init_(std::move(init)) {
  if (count < 0 || dim < 0)
    throw Error("nn::Embedding '" + this->path() + "' (count " + std::to_string(count) + ", dim " + std::to_string(dim) +
                "): count and dim must be >= 0");
}

void Embedding::init(Rng& rng, Tree& params, Tree&) const { params.set(key("weight"), init_(rng, {count_, dim_})); }

Tensor Embedding::forward(Context& ctx, const Tensor& ids, Loc loc) const {
  return embedding(ctx.toCompute(ctx.params.at(key("weight"), loc), loc), ids, loc);
}

Dropout::Dropout(std::string path, double rate) : Module(std::move(path)), rate_(rate) {
  if (!(rate >= 0 && rate < 1))
    throw Error("nn::Dropout '" + this->path() + "': rate must be in [0, 1), got " + std::to_string(rate));
}

Tensor Dropout::forward(Context& ctx, const Tensor& x, Loc loc) const {
  if (!ctx.training || rate_ == 0) return x;
  if (!ctx.rng.defined())
    throw Error(detail::where(loc) + ": nn::Dropout '" + path() +
                "' in training mode needs a random key: pass one to apply(params, state, x, true, key) "
                "(spmd::random::key(seed), folded with the step and axisIndex under pmap)");
  uint32_t hash = 2166136261u;  // FNV-1a of the path: this layer's stream
  for (char c : path()) hash = (hash ^ uint8_t(c)) * 16777619u;
  Tensor layerKey = random::foldIn(ctx.rng, Tensor(Array::of<int32_t>({}, std::vector<int32_t>{int32_t(hash)})), loc);
  return random::dropout(x, layerKey, rate_, loc);
}

void Sequential::init(Rng& rng, Tree& params, Tree& state) const {
  for (const auto& layer : layers_) layer->init(rng, params, state);
}

Tensor Sequential::forward(Context& ctx, const Tensor& x, Loc loc) const {
  Tensor y = x;
  for (const auto& layer : layers_) y = (*layer)(ctx, y, loc);
  return y;
}

}  // namespace spmd::nn
