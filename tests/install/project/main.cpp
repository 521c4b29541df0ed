// A user's program on an installed spmd: a custom Module (with RTTI on, so typeid and
// dynamic_cast work on it) whose activation has its own gradient (spmd::customVjp), trained for
// two steps with pmap on cpu:2. It checks the loss: zero weights give every class the same logit,
// so the first loss is ln(classes) exactly up to rounding; one SGD step on separable data must
// lower it. The activation's gradient matches finite differences, and an array goes out and back
// in through DLPack without a copy. A custom op of its own (spmd::registerCustomOp: softsign with
// a host kernel, a CUDA kernel and a VJP) trains under pmap on cpu:2 (the host kernel) and sim:2
// (the CUDA kernel, run in two orders of its threads), with the same loss, its gradient against
// finite differences; a racy CUDA kernel is caught on sim by name.
#include <spmd/io.h>
#include <spmd/spmd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <typeinfo>

namespace {

// log(1 + exp(x)), its derivative given as sigmoid(x) (the README's customVjp). Not named
// softplus: argument-dependent lookup would also find spmd::softplus for a Tensor argument.
spmd::Tensor ownSoftplus(const spmd::Tensor& x) {
  static const auto f = spmd::customVjp(
      [](const spmd::Tensor& v) { return std::pair{spmd::log(spmd::exp(v) + 1.0), v}; },
      [](const spmd::Tensor& v, const spmd::Tensor& g) { return g * spmd::sigmoid(v); });
  return f(x);
}

// The README's custom layer, as written there: x + gate * fc2(relu(fc1(x))).
class Residual final : public spmd::nn::Module {
 public:
  Residual(std::string path, int64_t width)
      : Module(std::move(path)), width_(width), fc1_(child("fc1"), width, width), fc2_(child("fc2"), width, width) {}
  void init(spmd::Rng& rng, spmd::Tree& params, spmd::Tree& state) const override {
    fc1_.init(rng, params, state);
    fc2_.init(rng, params, state);
    params.set(key("gate"), spmd::init::constant(0.5)(rng, {width_}));
  }

 protected:
  spmd::Tensor forward(spmd::nn::Context& ctx, const spmd::Tensor& x, spmd::Loc loc) const override {
    spmd::Tensor h = fc2_(ctx, spmd::relu(fc1_(ctx, x, loc), loc), loc);
    spmd::Tensor gate = spmd::broadcastTo(ctx.params.at(key("gate")), h.shape(), loc);
    return spmd::add(x, spmd::mul(h, gate, loc), loc);
  }

 private:
  int64_t width_;
  spmd::nn::Linear fc1_, fc2_;
};

// Linear, Residual, Linear; the output layer starts at zero, so the first loss is known.
class TinyClassifier final : public spmd::nn::Module {
 public:
  TinyClassifier(int64_t in, int64_t hidden, int64_t classes)
      : Module(""), hidden_("hidden", in, hidden, spmd::init::normal(0.5)), block_("block", hidden),
        out_("out", hidden, classes, spmd::init::zeros()) {}
  void init(spmd::Rng& rng, spmd::Tree& params, spmd::Tree& state) const override {
    hidden_.init(rng, params, state);
    block_.init(rng, params, state);
    out_.init(rng, params, state);
  }

 protected:
  spmd::Tensor forward(spmd::nn::Context& ctx, const spmd::Tensor& x, spmd::Loc loc) const override {
    return out_(ctx, block_(ctx, ownSoftplus(hidden_(ctx, x, loc)), loc), loc);
  }

 private:
  spmd::nn::Linear hidden_;
  Residual block_;
  spmd::nn::Linear out_;
};

// softsign(x) = x / (1 + |x|) as the user's own op: a host kernel (f32 and f64) and its VJP.
void registerSoftsign() {
  spmd::registerCustomOp(
      {.name = "consumer.softsign",
       .shape = [](const std::vector<spmd::TensorType>& in, const spmd::CustomAttributes&) { return std::vector{in.at(0)}; },
       .cpu =
           [](const spmd::CustomKernelArgs& a) {
             const spmd::CustomTensorView &x = a.inputs[0], &y = a.outputs[0];
             for (int64_t i = 0; i < y.numel(); ++i) {
               if (x.dtype == spmd::DType::f64) y.as<double>()[i] = x.as<double>()[i] / (1 + std::abs(x.as<double>()[i]));
               else y.as<float>()[i] = x.as<float>()[i] / (1 + std::abs(x.as<float>()[i]));
             }
           },
       // f64 on devices (this program's data): on sim built for the host, on a GPU by NVRTC.
       .cuda = {.source = R"(extern "C" __global__ void consumer_softsign(spmd_custom_args a, long long n) {
  const double* x = (const double*)a.in[0];
  double* y = (double*)a.out[0];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x)
    y[i] = x[i] / (1 + fabs(x[i]));
})",
                .entry = "consumer_softsign"},
       .vjp = [](const std::vector<spmd::Tensor>& in, const std::vector<spmd::Tensor>&,
                 const std::vector<spmd::Tensor>& g, const spmd::CustomAttributes&) {
         spmd::Tensor d = spmd::abs(in[0]) + 1.0;
         return std::vector{g[0] / (d * d)};
       }});
}

spmd::Tensor softsign(const spmd::Tensor& x) { return spmd::customCall("consumer.softsign", {x})[0]; }

int fail(const char* what, double got, double want) {
  std::fprintf(stderr, "consumer: %s: got %.9g, want %.9g\n", what, got, want);
  return 1;
}

}  // namespace

int main() {
  constexpr int64_t kIn = 4, kHidden = 8, kClasses = 3, kBatch = 8;
  TinyClassifier model(kIn, kHidden, kClasses);
  const spmd::nn::Module& base = model;
  if (typeid(base) != typeid(TinyClassifier) || !dynamic_cast<const TinyClassifier*>(&base)) return fail("RTTI", 0, 1);

  auto [params, state] = model.initialize(7);
  spmd::optim::Sgd sgd({.learningRate = 0.5});
  auto step = spmd::pmap(
      [&](const spmd::Tree& p, const spmd::Tensor& x, const spmd::Tensor& y) {
        auto [loss, grads] = spmd::value_and_grad([&](const spmd::Tree& q) {
          auto [logits, unused] = model.apply(q, state, x, /*training=*/true);
          return spmd::mean(spmd::softmaxCrossEntropy(logits, y), {0});
        })(p);
        auto [next, unusedState] = sgd.update(p, grads, spmd::Tree{});
        return std::tuple{next, loss};
      },
      {.inAxes = {spmd::replicated, spmd::split, spmd::split}, .devices = "cpu:2"});

  // Class c of a row is where its features peak: separable, so a step must help.
  std::vector<float> features(kBatch * kIn);
  std::vector<int32_t> labels(kBatch);
  for (int64_t i = 0; i < kBatch; ++i) {
    labels[i] = static_cast<int32_t>(i % kClasses);
    for (int64_t j = 0; j < kIn; ++j) features[i * kIn + j] = (j == labels[i] ? 2.0f : -0.5f) + 0.1f * float(i);
  }
  spmd::Array x = spmd::Array::of<float>({kBatch, kIn}, features);
  spmd::Array y = spmd::Array::of<int32_t>({kBatch}, labels);

  auto [p1, loss1] = step(params, x, y);
  auto [p2, loss2] = step(p1, x, y);
  double first = loss1.array().values<float>()[0], second = loss2.array().values<float>()[0];
  std::printf("consumer: loss %.6f then %.6f on %s\n", first, second, "cpu:2");
  if (std::abs(first - std::log(double(kClasses))) > 1e-6) return fail("first loss", first, std::log(double(kClasses)));
  if (!(second < first - 1e-3)) return fail("second loss (must fall)", second, first);

  auto gradient = spmd::jit([](const spmd::Tensor& v) {
    return spmd::grad([](const spmd::Tensor& q) { return spmd::sum(ownSoftplus(q), {0}); })(v);
  });
  auto value = spmd::jit([](const spmd::Tensor& v) { return spmd::sum(ownSoftplus(v), {0}); });
  const std::vector<double> points = {-2.0, 0.3, 1.5};
  spmd::Array g = gradient(spmd::Array::of<double>({3}, points)).array();
  for (size_t i = 0; i < points.size(); ++i) {
    const double h = 1e-6;
    const double up = value(spmd::Array::of<double>({1}, std::vector<double>{points[i] + h})).array().values<double>()[0];
    const double down = value(spmd::Array::of<double>({1}, std::vector<double>{points[i] - h})).array().values<double>()[0];
    if (std::abs(g.values<double>()[i] - (up - down) / (2 * h)) > 1e-8)
      return fail("customVjp gradient vs finite differences", g.values<double>()[i], (up - down) / (2 * h));
  }

  spmd::Array back = spmd::io::fromDLPack(spmd::io::toDLPack(x));
  if (back.data() != x.data()) return fail("DLPack round trip (the same bytes)", 0, 1);

  // The custom op: a linear layer through softsign, one SGD step under pmap on cpu:2 and sim:2,
  // the same loss on both and a lower one after; its gradient against finite differences (f64).
  registerSoftsign();
  auto lossOf = [](const spmd::Tensor& w, const spmd::Tensor& v, const spmd::Tensor& t) {
    spmd::Tensor e = softsign(spmd::matmul(v, w)) - t;
    return spmd::mean(e * e, {0, 1});
  };
  spmd::Array w0 = spmd::Array::of<double>({kIn, 2}, std::vector<double>{0.1, -0.2, 0.3, 0.05, -0.1, 0.2, 0.0, 0.15});
  std::vector<double> xs(kBatch * kIn), ts(kBatch * 2);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.37 * double(i));
  for (size_t i = 0; i < ts.size(); ++i) ts[i] = 0.5 * std::cos(0.7 * double(i));
  spmd::Array xd = spmd::Array::of<double>({kBatch, kIn}, xs), td = spmd::Array::of<double>({kBatch, 2}, ts);
  double before = 0;
  for (const char* devices : {"cpu:2", "sim:2"}) {
    auto train = spmd::pmap(
        [&](const spmd::Tensor& w, const spmd::Tensor& v, const spmd::Tensor& t) {
          auto [loss, g] = spmd::value_and_grad([&](const spmd::Tensor& q) { return lossOf(q, v, t); })(w);
          return std::tuple{w - g * 0.5, loss};
        },
        {.inAxes = {spmd::replicated, spmd::split, spmd::split}, .devices = devices});
    auto [w1, l0] = train(w0, xd, td);
    auto [w2, l1] = train(w1, xd, td);
    const double a = l0.array().values<double>()[0], b = l1.array().values<double>()[0];
    std::printf("consumer: custom op loss %.9f then %.9f on %s\n", a, b, devices);
    if (before != 0 && std::abs(a - before) > 1e-12) return fail("custom op loss on sim:2 vs cpu:2", a, before);
    before = a;
    if (!(b < a)) return fail("custom op loss (must fall)", b, a);
  }
  auto customGrad = spmd::jit([&](const spmd::Tensor& w, const spmd::Tensor& v, const spmd::Tensor& t) {
    return spmd::grad([&](const spmd::Tensor& q) { return lossOf(q, v, t); })(w);
  });
  auto customLoss = spmd::jit([&](const spmd::Tensor& w, const spmd::Tensor& v, const spmd::Tensor& t) { return lossOf(w, v, t); });
  spmd::Array gw = customGrad(w0, xd, td).array();
  for (int64_t i = 0; i < w0.numel(); ++i) {
    const double h = 1e-6;
    std::vector<double> up(w0.values<double>().begin(), w0.values<double>().end()), down = up;
    up[size_t(i)] += h, down[size_t(i)] -= h;
    const double fu = customLoss(spmd::Array::of<double>({kIn, 2}, up), xd, td).array().values<double>()[0];
    const double fd = customLoss(spmd::Array::of<double>({kIn, 2}, down), xd, td).array().values<double>()[0];
    if (std::abs(gw.values<double>()[i] - (fu - fd) / (2 * h)) > 1e-8)
      return fail("custom op gradient vs finite differences", gw.values<double>()[i], (fu - fd) / (2 * h));
  }

  // A racy CUDA kernel (every thread writes element 0 too) is caught on sim, naming the op.
  spmd::registerCustomOp(
      {.name = "consumer.racy",
       .shape = [](const std::vector<spmd::TensorType>& in, const spmd::CustomAttributes&) { return std::vector{in.at(0)}; },
       .cpu = [](const spmd::CustomKernelArgs&) {},
       .cuda = {.source = R"(extern "C" __global__ void consumer_racy(spmd_custom_args a, long long n) {
  const double* x = (const double*)a.in[0];
  double* y = (double*)a.out[0];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)blockDim.x * gridDim.x) {
    y[i] = x[i];
    y[0] = x[i];
  }
})",
                .entry = "consumer_racy"}});
  std::string caught;
  try {
    spmd::jit([](const spmd::Tensor& v) { return spmd::customCall("consumer.racy", {v})[0]; }, {.devices = "sim:1"})(xd);
  } catch (const spmd::Error& e) {
    caught = e.what();
  }
  if (caught.find("custom op 'consumer.racy': its CUDA kernel gave element 0 of output 0 different values") ==
      std::string::npos)
    return fail(("a racy kernel caught by name (got: " + caught + ")").c_str(), 0, 1);
  std::printf("consumer: a racy CUDA kernel was caught on sim\n");
  return 0;
}
