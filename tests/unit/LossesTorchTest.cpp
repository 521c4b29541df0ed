// The losses of frontend/Losses.h against torch.nn.functional's in f64 (tests/reference/
// torch_losses.py): values and the gradients with respect to the prediction and a float target
// within 1e-13, every reduction, both branches of the piecewise losses, logits far beyond exp's
// range, class axes of rank 2 and 4, targets of indices (some ignored: -100) and of probabilities
// (zeros among them);
// the log clamps by hand; bad arguments name the loss and the caller's line. The norms of
// frontend/Norms.h (vectorNorm, normalize, cosineSimilarity) against torch's in the same harness.
#include <cmath>
#include <cstdlib>
#include <map>

#include "TestUtil.h"
#include "TorchExchange.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using testing::maxRelativeError;
using testing::randomArray;

// Rows along axis 1 of a positive array scaled to sum to 1 (class probabilities), with element
// `zero` (a flat position, or -1) set to 0 before scaling.
Array probabilityRows(Shape shape, uint64_t seed, int64_t zero = -1) {
  Array a = randomArray(DType::f64, shape, seed, 0.05, 1.0);
  double* v = a.values<double>().data();
  if (zero >= 0) v[zero] = 0;
  const int64_t classes = shape[1], inner = a.numel() / (shape[0] * classes);
  for (int64_t n = 0; n < shape[0]; ++n)
    for (int64_t i = 0; i < inner; ++i) {
      double total = 0;
      for (int64_t c = 0; c < classes; ++c) total += v[(n * classes + c) * inner + i];
      for (int64_t c = 0; c < classes; ++c) v[(n * classes + c) * inner + i] /= total;
    }
  return a;
}

// a with its first row (index 0 of the first axis) zero.
Array withZeroRow(Array a) {
  const int64_t row = a.numel() / a.shape[0];
  for (int64_t i = 0; i < row; ++i) a.values<double>()[i] = 0;
  return a;
}

Array scaled(Array a, double by) {
  for (double& v : a.values<double>()) v *= by;
  return a;
}

TEST(LossesTorchTest, EveryLossAndItsGradientsMatchPyTorch) {
  if (std::string why = testing::torchMissing(); !why.empty()) GTEST_FAIL() << why;
  using R = LossReduction;
  struct Case {
    std::string name, kind, reduction, arg;  // as torch_losses.py reads them
    Array x, target, posWeight = Array();
    std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)> f;  // x, target, posWeight
  };
  auto labels = [](Shape shape, int32_t classes) {
    std::vector<int32_t> v(size_t(numElements(shape)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 7 + i / 3) % size_t(classes));
    return Array::of<int32_t>(shape, v);
  };
  // Every third index -100, torch's default ignore_index (padding).
  auto padded = [&](Shape shape, int32_t classes) {
    Array a = labels(shape, classes);
    for (int64_t i = 0; i < a.numel(); i += 3) a.values<int32_t>()[i] = -100;
    return a;
  };
  auto x = [](Shape shape, uint64_t seed, double scale = 1.0) { return scaled(randomArray(DType::f64, shape, seed), scale); };
  const std::vector<Case> cases = {
      {"mse_mean", "mse", "mean", "0", x({4, 5}, 1), x({4, 5}, 2),
       Array(), [](const Tensor& a, const Tensor& t, const Tensor&) { return mseLoss(a, t); }},
      {"mse_none", "mse", "none", "0", x({3, 4, 2}, 3), x({3, 4, 2}, 4), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return mseLoss(a, t, R::none); }},
      {"l1_sum", "l1", "sum", "0", x({4, 5}, 5), x({4, 5}, 6), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return l1Loss(a, t, R::sum); }},
      // Differences within [-2, 2]: both branches of beta 0.5 and delta 0.7.
      {"smooth_l1_mean", "smooth_l1", "mean", "0.5", x({6, 5}, 7), x({6, 5}, 8), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return smoothL1Loss(a, t, R::mean, 0.5); }},
      {"smooth_l1_beta0", "smooth_l1", "batchMean", "0", x({6, 5}, 9), x({6, 5}, 10), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return smoothL1Loss(a, t, R::batchMean, 0.0); }},
      {"huber_none", "huber", "none", "0.7", x({5, 4}, 11), x({5, 4}, 12), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return huberLoss(a, t, R::none, 0.7); }},
      {"bce_mean", "bce", "mean", "0", randomArray(DType::f64, {4, 5}, 13, 0.05, 0.95),
       randomArray(DType::f64, {4, 5}, 14, 0, 1), Array(),
       [](const Tensor& p, const Tensor& t, const Tensor&) { return binaryCrossEntropy(p, t); }},
      {"bce_logits_mean", "bce_logits", "mean", "0", x({4, 5}, 15, 4), randomArray(DType::f64, {4, 5}, 16, 0, 1),
       Array(), [](const Tensor& a, const Tensor& t, const Tensor&) { return binaryCrossEntropyWithLogits(a, t); }},
      // Logits to +-300: e^300 is beyond f32, e^-300 near f64's smallest; no overflow either side.
      {"bce_logits_far", "bce_logits", "none", "0", x({3, 4}, 17, 300), randomArray(DType::f64, {3, 4}, 18, 0, 1),
       Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return binaryCrossEntropyWithLogits(a, t, R::none); }},
      {"bce_logits_pos_weight", "bce_logits", "sum", "0", x({4, 5}, 19, 3), randomArray(DType::f64, {4, 5}, 20, 0, 1),
       randomArray(DType::f64, {5}, 21, 0.5, 3),
       [](const Tensor& a, const Tensor& t, const Tensor& w) { return binaryCrossEntropyWithLogits(a, t, R::sum, w); }},
      {"ce_indices", "ce", "mean", "0", x({6, 5}, 22, 3), labels({6}, 5), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return crossEntropy(a, t); }},
      {"ce_indices_spatial_smoothed", "ce", "mean", "0.1", x({2, 5, 3, 4}, 23, 3), labels({2, 3, 4}, 5), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return crossEntropy(a, t, R::mean, 0.1); }},
      {"ce_probabilities", "ce", "none", "0", x({4, 5}, 24, 3), probabilityRows({4, 5}, 25, 3), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return crossEntropy(a, t, R::none); }},
      {"ce_probabilities_spatial_smoothed", "ce", "sum", "0.2", x({2, 3, 4}, 26, 3), probabilityRows({2, 3, 4}, 27),
       Array(), [](const Tensor& a, const Tensor& t, const Tensor&) { return crossEntropy(a, t, R::sum, 0.2); }},
      {"ce_ignored_smoothed", "ce", "mean", "0.1", x({2, 5, 3, 4}, 34, 3), padded({2, 3, 4}, 5), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return crossEntropy(a, t, R::mean, 0.1); }},
      {"ce_ignored_none", "ce", "none", "0", x({6, 5}, 35, 3), padded({6}, 5), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return crossEntropy(a, t, R::none); }},
      {"nll_ignored_sum", "nll", "sum", "0", x({7, 4}, 36), padded({7}, 4), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return nllLoss(a, t, R::sum); }},
      {"nll_ignored_mean", "nll", "mean", "0", x({7, 4}, 37), padded({7}, 4), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return nllLoss(a, t); }},
      {"nll_mean", "nll", "mean", "0", x({6, 5}, 28), labels({6}, 5), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return nllLoss(a, t); }},
      {"nll_spatial_none", "nll", "none", "0", x({2, 4, 3}, 29), labels({2, 3}, 4), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return nllLoss(a, t, R::none); }},
      // A target of probabilities with a 0 (xlogy's 0 and its gradient), per example.
      {"kl_batchmean", "kl", "batchMean", "0", x({4, 5}, 30), probabilityRows({4, 5}, 31, 7), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return klDiv(a, t, R::batchMean); }},
      {"kl_log_target", "kl", "mean", "1", x({4, 5}, 32), x({4, 5}, 33), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return klDiv(a, t, R::mean, true); }},
      // The norms (frontend/Norms.h; ARG: ord/axes), a zero row among them (gradient 0, as torch's).
      {"norm2_zero_row", "norm", "none", "2/1", withZeroRow(x({4, 5}, 38)), labels({1}, 1), Array(),
       [](const Tensor& a, const Tensor&, const Tensor&) { return vectorNorm(a, {1}); }},
      {"norm1_axes", "norm", "none", "1/0,2", x({3, 4, 5}, 39), labels({1}, 1), Array(),
       [](const Tensor& a, const Tensor&, const Tensor&) { return vectorNorm(a, {0, 2}, 1.0); }},
      {"norm3", "norm", "none", "3/-1", x({3, 4, 5}, 40), labels({1}, 1), Array(),
       [](const Tensor& a, const Tensor&, const Tensor&) { return vectorNorm(a, {-1}, 3.0); }},
      {"norm_inf", "norm", "none", "inf/1", x({3, 4, 5}, 41), labels({1}, 1), Array(),
       [](const Tensor& a, const Tensor&, const Tensor&) { return vectorNorm(a, {1}, INFINITY); }},
      {"normalize", "normalize", "none", "2/1", withZeroRow(x({4, 5, 2}, 42)), labels({1}, 1), Array(),
       [](const Tensor& a, const Tensor&, const Tensor&) { return normalize(a); }},
      {"cosine", "cosine", "none", "1", x({4, 5, 2}, 43), x({4, 5, 2}, 44), Array(),
       [](const Tensor& a, const Tensor& t, const Tensor&) { return cosineSimilarity(a, t); }}};
  testing::Exchange exchange;
  struct Ours {
    Array y, dx, dt;
  };
  std::map<std::string, Ours> ours;
  std::string specs;
  uint64_t seed = 500;
  for (const Case& c : cases) {
    const bool floatTarget = c.target.dtype == DType::f64;
    const Tensor w = c.posWeight.storage ? Tensor(c.posWeight) : Tensor(Array::scalar(DType::f64, 1.0));
    const bool weighted = c.posWeight.storage != nullptr;
    const auto& f = c.f;
    auto call = [&](const Tensor& a, const Tensor& t, const Tensor& pw) { return f(a, t, weighted ? pw : Tensor()); };
    Array y = jit(call)(c.x, c.target, w).array();
    const Array g = randomArray(DType::f64, y.shape, seed++);
    Ours result{y, Array(), Array()};
    if (floatTarget) {
      auto step = jit([&](const Tensor& a, const Tensor& t, const Tensor& pw, const Tensor& cotangent) {
        Tree both;
        both.set("x", a);
        both.set("t", t);
        return grad([&](const Tree& at) {
          const Tensor weightedLoss = call(at.at("x"), at.at("t"), pw) * cotangent;
          return sum(weightedLoss, testing::allAxes(weightedLoss));
        })(both);
      });
      const Tree grads = step(c.x, c.target, w, g);
      result.dx = grads.at("x").array(), result.dt = grads.at("t").array();
    } else {
      auto step = jit([&](const Tensor& a, const Tensor& t, const Tensor& pw, const Tensor& cotangent) {
        return grad([&](const Tensor& u) {
          const Tensor weightedLoss = call(u, t, pw) * cotangent;
          return sum(weightedLoss, testing::allAxes(weightedLoss));
        })(a);
      });
      result.dx = step(c.x, c.target, w, g).array();
    }
    ours[c.name] = result;
    exchange.write("x." + c.name, c.x);
    exchange.write("t." + c.name, c.target);
    exchange.write("g." + c.name, g);
    if (weighted) exchange.write("w." + c.name, c.posWeight);
    specs += " " + c.name + " " + c.kind + " " + c.reduction + " " + c.arg;
  }
  exchange.close();
  std::string command = testing::python() + " " SPMD_SOURCE_DIR "/tests/reference/torch_losses.py " + exchange.dir() + specs;
  ASSERT_EQ(std::system(command.c_str()), 0) << "failed: " << command;
  for (const auto& [name, r] : ours) {
    EXPECT_LT(maxRelativeError(r.y, exchange.read("y." + name, r.y.shape, DType::f64)), 1e-13) << name << " y";
    EXPECT_LT(maxRelativeError(r.dx, exchange.read("dx." + name, r.dx.shape, DType::f64)), 1e-13) << name << " dx";
    if (r.dt.storage) {
      EXPECT_LT(maxRelativeError(r.dt, exchange.read("dt." + name, r.dt.shape, DType::f64)), 1e-13) << name << " dt";
    }
    for (int64_t i = 0; i < r.y.numel(); ++i) EXPECT_TRUE(std::isfinite(testing::valueAt(r.y, i))) << name;
  }
  EXPECT_EQ(ours["mse_none"].y.shape, (Shape{3, 4, 2}));
  EXPECT_EQ(ours["nll_spatial_none"].y.shape, (Shape{2, 3}));
  EXPECT_EQ(ours["ce_probabilities"].y.shape, (Shape{4}));
  EXPECT_EQ(ours["mse_mean"].y.shape, (Shape{}));
}

// binaryCrossEntropy at probabilities 0 and 1: each log clamped at -100 (torch's), so the loss is
// 100 where the target is the other end and 0 where it matches, with finite gradients; f32 too.
TEST(LossesTorchTest, BinaryCrossEntropyClampsItsLogsAtProbabilitiesZeroAndOne) {
  for (DType dtype : {DType::f64, DType::f32}) {
    const Array p = Array::of<double>({4}, std::vector<double>{0.0, 1.0, 0.0, 1.0});
    const Array t = Array::of<double>({4}, std::vector<double>{1.0, 0.0, 0.0, 1.0});
    auto step = jit([&](const Tensor& a, const Tensor& b) {
      return value_and_grad([&](const Tensor& u) { return binaryCrossEntropy(u, cast(b, dtype), LossReduction::sum); })(
          cast(a, dtype));
    });
    auto [loss, dp] = step(p, t);
    EXPECT_DOUBLE_EQ(testing::valueAt(loss.array(), 0), 200.0) << dtypeName(dtype);
    for (int64_t i = 0; i < 4; ++i) EXPECT_TRUE(std::isfinite(testing::valueAt(dp.array(), i))) << dtypeName(dtype) << i;
  }
}

// An ignored index adds nothing and the mean counts only the others: with ignoreIndex 1 (a valid
// class) the mean over rows {1, 2} is row 1's loss alone; every index ignored gives NaN for the
// mean (0 / 0, as torch) and 0 for the sum.
TEST(LossesTorchTest, IgnoredIndicesAddNothingAndTheMeanCountsTheRest) {
  const Array logits = randomArray(DType::f64, {2, 3}, 7, -2, 2);
  const Tensor t(Array::of<int32_t>({2}, std::vector<int32_t>{1, 2}));
  auto losses = jit([](const Tensor& x, const Tensor& y) {
    return std::tuple{crossEntropy(x, y, LossReduction::mean, 0.0, 1), crossEntropy(x, y, LossReduction::none),
                      crossEntropy(x, y, LossReduction::mean, 0.0, 2), crossEntropy(x, y, LossReduction::sum, 0.0, 2)};
  });
  auto [one, each, lastIgnored, lastIgnoredSum] = losses(logits, t);
  EXPECT_EQ(testing::valueAt(one.array(), 0), testing::valueAt(each.array(), 1));
  EXPECT_EQ(testing::valueAt(lastIgnored.array(), 0), testing::valueAt(each.array(), 0));
  EXPECT_GT(testing::valueAt(each.array(), 0), 0);
  EXPECT_EQ(testing::valueAt(lastIgnoredSum.array(), 0), testing::valueAt(each.array(), 0));
  const Tensor none(Array::of<int32_t>({2}, std::vector<int32_t>{-100, -100}));
  auto all = jit([](const Tensor& x, const Tensor& y) {
    return std::pair{nllLoss(x, y), nllLoss(x, y, LossReduction::sum)};
  });
  auto [mean, total] = all(logits, none);
  EXPECT_TRUE(std::isnan(testing::valueAt(mean.array(), 0)));
  EXPECT_EQ(testing::valueAt(total.array(), 0), 0.0);
}

TEST(LossesTorchTest, BadArgumentsNameTheLossAndTheLine) {
  const Tensor a(randomArray(DType::f32, {4, 3}, 1)), column(randomArray(DType::f32, {4, 1}, 2));
  const Tensor ids(Array::of<int32_t>({4}, std::vector<int32_t>{0, 1, 2, 0}));
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto traced = [&](auto&& body) {
    return message([&] { jit([&](const Tensor& x, const Tensor& y, const Tensor& i) { return body(x, y, i); })(a, column, ids); });
  };
  const std::string shapes = traced([](const Tensor& x, const Tensor& y, const Tensor&) { return mseLoss(x, y); });
  EXPECT_NE(shapes.find("LossesTorchTest.cpp:"), std::string::npos) << shapes;
  EXPECT_NE(shapes.find("spmd::mseLoss: target f32[4, 1] and input f32[4, 3] differ in shape"), std::string::npos) << shapes;
  const std::string integer = traced([](const Tensor&, const Tensor&, const Tensor& i) { return l1Loss(i, i); });
  EXPECT_NE(integer.find("spmd::l1Loss: input i32[4] is not a float tensor"), std::string::npos) << integer;
  const std::string beta =
      traced([](const Tensor& x, const Tensor&, const Tensor&) { return smoothL1Loss(x, x, LossReduction::mean, -1); });
  EXPECT_NE(beta.find("beta must be a finite number >= 0, got -1"), std::string::npos) << beta;
  const std::string delta =
      traced([](const Tensor& x, const Tensor&, const Tensor&) { return huberLoss(x, x, LossReduction::mean, 0); });
  EXPECT_NE(delta.find("delta must be a finite number > 0"), std::string::npos) << delta;
  const std::string target = traced([](const Tensor& x, const Tensor&, const Tensor& i) {
    return crossEntropy(x, reshape(i, {2, 2}));
  });
  EXPECT_NE(target.find("spmd::crossEntropy: i32 target i32[2, 2] does not fit logits f32[4, 3]"), std::string::npos)
      << target;
  EXPECT_NE(target.find("[4]"), std::string::npos) << target;
  const std::string probabilities =
      traced([](const Tensor& x, const Tensor& y, const Tensor&) { return crossEntropy(x, y); });
  EXPECT_NE(probabilities.find("is neither i32 class indices of shape [4] nor class probabilities"), std::string::npos)
      << probabilities;
  const std::string rank1 = traced([](const Tensor&, const Tensor& y, const Tensor& i) {
    return nllLoss(reshape(y, {4}), i);
  });
  EXPECT_NE(rank1.find("needs a batch and a class axis"), std::string::npos) << rank1;
  const std::string weight = traced([](const Tensor& x, const Tensor& y, const Tensor&) {
    return binaryCrossEntropyWithLogits(x, x, LossReduction::mean, reshape(y, {4}));
  });
  EXPECT_NE(weight.find("posWeight f32[4] does not broadcast against logits f32[4, 3]"), std::string::npos) << weight;
  const std::string scalar = traced([](const Tensor& x, const Tensor&, const Tensor&) {
    const Tensor s = sum(x, {0, 1});
    return mseLoss(s, s, LossReduction::batchMean);
  });
  EXPECT_NE(scalar.find("LossReduction::batchMean divides by the batch"), std::string::npos) << scalar;
  const std::string ord = traced([](const Tensor& x, const Tensor&, const Tensor&) { return vectorNorm(x, {1}, 0.0); });
  EXPECT_NE(ord.find("spmd::vectorNorm: ord must be positive"), std::string::npos) << ord;
  const std::string axis = traced([](const Tensor& x, const Tensor&, const Tensor&) { return normalize(x, 2.0, 2); });
  EXPECT_NE(axis.find("spmd::normalize: axis 2 is outside f32[4, 3] (rank 2"), std::string::npos) << axis;
  const std::string cosine =
      traced([](const Tensor& x, const Tensor& y, const Tensor&) { return cosineSimilarity(x, y); });
  EXPECT_NE(cosine.find("spmd::cosineSimilarity: b f32[4, 1] and a f32[4, 3] differ"), std::string::npos) << cosine;
  const std::string untraced = message([&] { mseLoss(a, a); });
  EXPECT_NE(untraced.find("mseLoss"), std::string::npos) << untraced;
}

}  // namespace
}  // namespace spmd
