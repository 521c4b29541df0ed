// A user's program on an installed spmd: a custom Module (with RTTI on, so typeid and
// dynamic_cast work on it) whose activation has its own gradient (spmd::customVjp), trained for
// two steps with pmap on cpu:2. It checks the loss: zero weights give every class the same logit,
// so the first loss is ln(classes) exactly up to rounding; one SGD step on separable data must
// lower it. The activation's gradient matches finite differences, and an array goes out and back
// in through DLPack without a copy.
#include <spmd/io.h>
#include <spmd/spmd.h>

#include <cmath>
#include <cstdio>
#include <typeinfo>

namespace {

// softplus(x) = log(1 + exp(x)), its derivative given as sigmoid(x) (the README's customVjp).
spmd::Tensor softplus(const spmd::Tensor& x) {
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
    return out_(ctx, block_(ctx, softplus(hidden_(ctx, x, loc)), loc), loc);
  }

 private:
  spmd::nn::Linear hidden_;
  Residual block_;
  spmd::nn::Linear out_;
};

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
    return spmd::grad([](const spmd::Tensor& q) { return spmd::sum(softplus(q), {0}); })(v);
  });
  auto value = spmd::jit([](const spmd::Tensor& v) { return spmd::sum(softplus(v), {0}); });
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
  return 0;
}
