// Whole training steps: the ResNet-18 loss gradient against directional finite differences in
// float64, SGD and Adam steps against the same formulas on the host, and a reduced-width
// ResNet-18 whose loss falls over 50 SGD steps on Fashion-MNIST.
#include <cmath>
#include <filesystem>
#include <random>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "frontend/models/ResNet.h"
#include "frontend/data/FashionMnist.h"

namespace spmd {
namespace {

using spmd::testing::cloneArray;
using spmd::testing::randomArray;

Array toF64(const Array& a) {
  Array b = Array::zeros(DType::f64, a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) b.values<double>()[i] = a.values<float>()[i];
  return b;
}

Tree mapTree(const Tree& tree, const std::function<Array(const std::string&, const Array&)>& fn) {
  Tree out;
  for (const auto& [name, t] : tree) out.set(name, fn(name, t.array()));
  return out;
}

template <typename T>
double at(const Tensor& t, int64_t i) { return t.array().values<T>()[i]; }

// The classifier loss on one batch; BN in training mode, its new running stats as aux.
auto classifierLoss(const nn::Module& model, const Tree& state, const Tensor& x, const Tensor& y) {
  return [&model, &state, x, y](const Tree& p) {
    auto [logits, newState] = model.apply(p, state, x, /*training=*/true);
    return std::pair{mean(softmaxCrossEntropy(logits, y), {0}), newState};
  };
}

TEST(TrainStepTest, ResNetLossGradientMatchesDirectionalFiniteDifferencesInF64) {
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 2});
  auto [params32, state32] = model->initialize(3);
  auto toDouble = [](const std::string&, const Array& a) { return toF64(a); };
  Tree params = mapTree(params32, toDouble), state = mapTree(state32, toDouble);
  // Kaiming-scale weights so the signal (and the gradient) is not tiny at every layer.
  params = mapTree(params, [](const std::string& name, const Array& a) {
    Array b = cloneArray(a);
    if (name.find("weight") != std::string::npos && a.shape.size() > 1) {
      Array r = randomArray(DType::f64, a.shape, std::hash<std::string>()(name), -0.5, 0.5);
      for (int64_t i = 0; i < a.numel(); ++i) b.values<double>()[i] = r.values<double>()[i];
    }
    return b;
  });
  Array x = randomArray(DType::f64, {3, 1, 16, 16}, 11);
  Array y = Array::of<int32_t>({3}, std::vector<int32_t>{4, 0, 9});

  auto lossFn = jit([&](const Tree& p) { return classifierLoss(*model, state, x, y)(p).first; });
  auto gradFn = jit([&](const Tree& p) {
    return value_and_grad(classifierLoss(*model, state, x, y), has_aux)(p);
  });
  auto [loss, grads, newState] = gradFn(params);
  EXPECT_NEAR(at<double>(loss, 0), at<double>(lossFn(params), 0), 1e-12);
  EXPECT_EQ(grads.size(), params.size());

  // Small enough that no ReLU changes sign along the path (1e-5 already crosses kinks here).
  const double h = 1e-7;
  for (uint64_t d = 0; d < 3; ++d) {
    std::mt19937_64 rng(100 + d);
    std::normal_distribution<double> normal;
    Tree direction = mapTree(params, [&](const std::string&, const Array& a) {
      Array v = Array::zeros(DType::f64, a.shape);
      for (double& e : v.values<double>()) e = normal(rng);
      return v;
    });
    double analytic = 0;
    for (const auto& [name, g] : grads)
      for (int64_t i = 0; i < g.numel(); ++i)
        analytic += at<double>(g, i) * at<double>(direction.at(name), i);
    auto shifted = [&](double step) {
      return mapTree(params, [&](const std::string& name, const Array& a) {
        Array b = cloneArray(a);
        for (int64_t i = 0; i < a.numel(); ++i)
          b.values<double>()[i] += step * direction.at(name).array().values<double>()[i];
        return b;
      });
    };
    double numeric = (at<double>(lossFn(shifted(h)), 0) - at<double>(lossFn(shifted(-h)), 0)) / (2 * h);
    double relative = std::fabs(numeric - analytic) / std::fabs(analytic);
    std::printf("  direction %llu: <grad, v> = %.10g, finite difference = %.10g, rel. error %.2e\n",
                (unsigned long long)d, analytic, numeric, relative);
    EXPECT_LT(relative, 1e-6);
  }
  EXPECT_EQ(lossFn.compileCount(), 1) << "the shifted parameters must reuse the compiled loss";
}

// One jitted SGD or Adam step next to the host formula applied to the jitted gradients.
TEST(TrainStepTest, SgdAndAdamStepsMatchTheirFormulas) {
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 4});
  auto [params, state] = model->initialize(5);
  Array x = randomArray(DType::f32, {4, 1, 12, 12}, 21);
  Array y = Array::of<int32_t>({4}, std::vector<int32_t>{1, 2, 3, 4});
  auto gradFn = jit([&](const Tree& p) {
    return value_and_grad(classifierLoss(*model, state, x, y), has_aux)(p);
  });
  auto [loss, grads, newState] = gradFn(params);

  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9, .weightDecay = 1e-3, .nesterov = true});
  Tree momentum = sgd.init(params);
  // A non-zero buffer, as after earlier steps.
  momentum = mapTree(momentum, [](const std::string& name, const Array& a) {
    return randomArray(DType::f32, a.shape, std::hash<std::string>()(name) + 1, -0.1, 0.1);
  });
  auto sgdStep = jit([&](const Tree& p, const Tree& g, const Tree& s) { return sgd.update(p, g, s); });
  auto [sgdParams, sgdState] = sgdStep(params, grads, momentum);

  optim::Adam adam({.learningRate = 1e-2, .weightDecay = 1e-2});
  Tree moments = adam.init(params);
  auto adamStep = jit([&](const Tree& p, const Tree& g, const Tree& s) { return adam.update(p, g, s); });
  auto [adamParams, adamState] = adamStep(params, grads, moments);
  auto [adamParams2, adamState2] = adamStep(adamParams, grads, adamState);  // t = 2

  double worstSgd = 0, worstAdam = 0;
  for (const auto& [name, p] : params) {
    for (int64_t i = 0; i < p.numel(); ++i) {
      double w = at<float>(p, i), g = at<float>(grads.at(name), i) + 1e-3 * w;
      double buf = 0.9 * at<float>(momentum.at(name), i) + g;
      double expected = w - 0.05 * (g + 0.9 * buf);
      worstSgd = std::max(worstSgd, std::fabs(at<float>(sgdParams.at(name), i) - expected));
      EXPECT_NEAR(at<float>(sgdState.at(name), i), buf, 1e-6 + 1e-5 * std::fabs(buf));
      // Two Adam steps with the same gradient.
      double m = 0, v = 0, wt = w;
      for (int t = 1; t <= 2; ++t) {
        double gt = at<float>(grads.at(name), i) + 1e-2 * wt;
        m = 0.9 * m + 0.1 * gt;
        v = 0.999 * v + 0.001 * gt * gt;
        double mhat = m / (1 - std::pow(0.9, t)), vhat = v / (1 - std::pow(0.999, t));
        wt -= 1e-2 * mhat / (std::sqrt(vhat) + 1e-8);
      }
      worstAdam = std::max(worstAdam, std::fabs(at<float>(adamParams2.at(name), i) - wt));
    }
  }
  std::printf("  max |spmd - formula|: SGD (Nesterov, wd) %.2e, Adam after 2 steps %.2e\n",
              worstSgd, worstAdam);
  EXPECT_LT(worstSgd, 1e-6);
  EXPECT_LT(worstAdam, 1e-5);
  EXPECT_NEAR(at<float>(adamState2.at("beta1_power"), 0), 0.81, 1e-6);
}

TEST(TrainStepTest, BadOptimizerConfigurationsAreRejected) {
  EXPECT_THROW(optim::Sgd({.learningRate = 0}), Error);
  EXPECT_THROW(optim::Sgd({.learningRate = 0.1, .nesterov = true}), Error);
  EXPECT_THROW(optim::Adam({.beta1 = 1.0}), Error);
}

TEST(TrainStepTest, LossFallsOverFiftyStepsOnFashionMnist) {
  std::string dir = data::defaultFashionMnistDir();
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << dir
                 << " (apt-get install dataset-fashion-mnist; scripts/setup.sh does)";
  data::Dataset train = data::loadFashionMnist("train", 512);
  auto model = models::resnet18({.inChannels = 1, .numClasses = 10, .width = 8});
  auto [params, state] = model->initialize(0);
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  Tree opt = sgd.init(params);
  auto step = jit([&](const Tree& p, const Tree& o, const Tree& s, const Tensor& x, const Tensor& y) {
    auto [loss, grads, newState] = value_and_grad(classifierLoss(*model, s, x, y), has_aux)(p);
    auto [newParams, newOpt] = sgd.update(p, grads, o);
    return std::tuple{newParams, newOpt, newState, loss};
  });
  const int64_t batch = 32, steps = 50;
  std::vector<double> losses;
  for (int64_t i = 0; i < steps; ++i) {
    data::Dataset b = data::slice(train, (i * batch) % train.size(), batch);
    auto [p2, o2, s2, loss] = step(params, opt, state, b.images(), b.labels());
    params = p2, opt = o2, state = s2;
    losses.push_back(at<float>(loss, 0));
  }
  auto average = [&](int64_t from, int64_t to) {
    double s = 0;
    for (int64_t i = from; i < to; ++i) s += losses[i];
    return s / double(to - from);
  };
  double first = average(0, 10), last = average(steps - 10, steps);
  std::printf("  mean loss, steps 1-10: %.3f; steps 41-50: %.3f\n", first, last);
  for (double l : losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(last, 0.7 * first) << "the loss should fall clearly over 50 steps";
  EXPECT_EQ(step.compileCount(), 1);
}

}  // namespace
}  // namespace spmd
