// Every VJP rule against central finite differences in float64 on small random shapes. Each case
// is loss = sum(op(inputs) * r) for a fixed random cotangent r; the autodiff gradient (through
// spmd::value_and_grad, the autodiff pass and the kernels) must match
//   (loss(x + h e_i) - loss(x - h e_i)) / 2h,  h = 1e-6,
// with max |fd - ad| / max |ad| < 1e-7 per input. Inputs keep away from kinks (relu at 0, ties
// in max) so the finite differences are valid. The test also fails if an op with a VJP rule is
// not exercised by any case.
#include <functional>
#include <regex>
#include <set>

#include "TestUtil.h"
#include "ir/SpmdDialect.h"
#include "frontend/spmd.h"

namespace spmd {
namespace {

using spmd::testing::allAxes;
using spmd::testing::cloneArray;
using spmd::testing::randomArray;

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-7;

struct GradCase {
  std::string name;
  std::vector<Array> inputs;  // differentiated: named "x0", "x1", ...
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> f;
};

// Inputs in +-[0.2, 1]: away from relu's kink and from zero denominators.
Array awayFromZero(const Shape& shape, uint64_t seed) {
  Array a = randomArray(DType::f64, shape, seed, 0.2, 1.0);
  Array sign = randomArray(DType::f64, shape, seed + 7919, -1, 1);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (sign.values<double>()[i] < 0) a.values<double>()[i] *= -1;
  return a;
}

class Checker {
 public:
  Checker(const GradCase& c, uint64_t seed) : case_(c), seed_(seed) {
    for (size_t i = 0; i < c.inputs.size(); ++i) params_.set("x" + std::to_string(i), c.inputs[i]);
  }

  // loss(params) traced: sum of each output times its fixed random cotangent.
  Tensor loss(const Tree& p) {
    std::vector<Tensor> args;
    for (size_t i = 0; i < case_.inputs.size(); ++i) args.push_back(p.at("x" + std::to_string(i)));
    std::vector<Tensor> outputs = case_.f(args);
    if (cotangents_.empty())
      for (size_t i = 0; i < outputs.size(); ++i)
        cotangents_.push_back(randomArray(DType::f64, outputs[i].shape(), seed_ + 100 + i));
    Tensor total;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor term = sum(mul(outputs[i], Tensor(cotangents_[i])), allAxes(outputs[i]));
      total = total.defined() ? add(total, term) : term;
    }
    return total;
  }

  // Returns the ops the traced IR used.
  std::set<std::string> run() {
    auto gradFn = jit([&](const Tree& p) { return value_and_grad([&](const Tree& q) { return loss(q); })(p); });
    auto lossFn = jit([&](const Tree& p) { return loss(p); });
    auto [value, grads] = gradFn(params_);
    double direct = lossFn(params_).array().values<double>()[0];
    EXPECT_NEAR(value.array().values<double>()[0], direct, 1e-12 * (1 + std::fabs(direct)))
        << case_.name << ": value_and_grad's value differs from the loss";
    for (const auto& [name, param] : params_) {
      Array analytic = grads.at(name).array();
      double worstDiff = 0, scale = 0;
      for (int64_t i = 0; i < param.numel(); ++i) {
        auto at = [&](double delta) {
          Tree shifted = params_;
          Array copy = cloneArray(param.array());
          copy.values<double>()[i] += delta;
          shifted.set(name, copy);
          return lossFn(shifted).array().values<double>()[0];
        };
        double fd = (at(kStep) - at(-kStep)) / (2 * kStep);
        double ad = analytic.values<double>()[i];
        worstDiff = std::max(worstDiff, std::fabs(fd - ad));
        scale = std::max(scale, std::fabs(ad));
      }
      double relative = worstDiff / std::max(scale, 1e-12);
      std::printf("  %-34s d/d%s %-16s max|fd-ad|/max|ad| = %.2e\n", case_.name.c_str(),
                  name.c_str(), param.typeString().c_str(), relative);
      EXPECT_GT(scale, 0) << case_.name << ": gradient w.r.t. " << name << " is all zeros";
      EXPECT_LT(relative, kTolerance) << case_.name << ": gradient w.r.t. " << name;
    }
    std::set<std::string> ops;
    std::string ir = gradFn.lastTracedIr();
    std::regex opName(R"(spmd\.([a-z_0-9]+))");
    for (auto it = std::sregex_iterator(ir.begin(), ir.end(), opName); it != std::sregex_iterator(); ++it)
      ops.insert((*it)[1]);
    return ops;
  }

 private:
  const GradCase& case_;
  uint64_t seed_;
  Tree params_;
  std::vector<Array> cotangents_;
};

std::vector<GradCase> cases() {
  uint64_t seed = 1;
  auto x = [&](Shape s) { return awayFromZero(s, seed++); };
  auto positive = [&](Shape s) { return randomArray(DType::f64, s, seed++, 0.5, 2.0); };
  using T = std::vector<Tensor>;
  std::vector<GradCase> list = {
      {"conv2d 3x3 pad1 bias", {x({2, 3, 5, 5}), x({4, 3, 3, 3}), x({4})},
       [](const T& a) { return T{conv2d(a[0], a[1], a[2], {{1, 1}, {1, 1}})}; }},
      {"conv2d 3x3 stride2", {x({2, 2, 7, 6}), x({3, 2, 3, 3})},
       [](const T& a) { return T{conv2d(a[0], a[1], {}, {{2, 2}, {1, 1}})}; }},
      {"conv2d 1x1 stride2", {x({2, 3, 5, 5}), x({2, 3, 1, 1}), x({2})},
       [](const T& a) { return T{conv2d(a[0], a[1], a[2], {{2, 2}, {0, 0}})}; }},
      {"conv2d 2 groups dilated 2x1", {x({2, 4, 6, 5}), x({6, 2, 3, 3}), x({6})},
       [](const T& a) { return T{conv2d(a[0], a[1], a[2], {{1, 2}, {2, 1}, {2, 1}, 2})}; }},
      {"conv2d depthwise stride2", {x({2, 3, 7, 6}), x({3, 1, 3, 3})},
       [](const T& a) { return T{conv2d(a[0], a[1], {}, {{2, 2}, {1, 1}, {1, 1}, 3})}; }},
      {"convTranspose2d stride2 2 groups output padding", {x({2, 4, 3, 3}), x({4, 3, 3, 2}), x({6})},
       [](const T& a) { return T{convTranspose2d(a[0], a[1], a[2], {{2, 2}, {1, 0}, {1, 1}, {1, 1}, 2})}; }},
      {"batch_norm_train (y, mean, var)", {x({3, 4, 3, 2}), x({4}), x({4})},
       [](const T& a) {
         BatchNormResult r = batchNormTrain(a[0], a[1], a[2], 1e-5);
         return T{r.y, r.mean, r.variance};
       }},
      // Rows 1 and 4 padding: the cotangents reach them through y alone.
      {"batch_norm_train masked (y, mean, var)", {x({5, 3, 3, 2}), x({3}), x({3})},
       [](const T& a) {
         Tensor mask(Array::of<double>({5}, std::vector<double>{1, 0, 1, 1, 0}));
         BatchNormResult r = batchNormTrain(a[0], a[1], a[2], 1e-5, mask);
         return T{r.y, r.mean, r.variance};
       }},
      {"batch_norm_train 2d", {x({6, 3}), x({3}), x({3})},
       [](const T& a) { return T{batchNormTrain(a[0], a[1], a[2], 1e-3).y}; }},
      {"batch_norm_infer", {x({3, 4, 3, 2}), x({4}), x({4}), x({4}), positive({4})},
       [](const T& a) { return T{batchNormInfer(a[0], a[1], a[2], a[3], a[4], 1e-5)}; }},
      {"add sub mul", {x({3, 4}), x({3, 4})},
       [](const T& a) { return T{add(a[0], a[1]), sub(a[0], a[1]), mul(a[0], a[1])}; }},
      {"div", {x({3, 4}), positive({3, 4})}, [](const T& a) { return T{div(a[0], a[1])}; }},
      {"operators", {x({3, 4}), positive({4})},
       [](const T& a) { return T{(a[0] + a[1]) * a[0] - a[0] / a[1], 2.0 - a[0] * 3.0 + 1.0 / a[1], -a[0]}; }},
      {"max", {x({3, 4}), x({3, 4})}, [](const T& a) { return T{maximum(a[0], a[1])}; }},
      {"min", {x({3, 4}), x({3, 4})}, [](const T& a) { return T{minimum(a[0], a[1])}; }},
      {"neg exp relu", {x({3, 4})}, [](const T& a) { return T{neg(a[0]), exp(a[0]), relu(a[0])}; }},
      {"log sqrt", {positive({3, 4})}, [](const T& a) { return T{log(a[0]), sqrt(a[0])}; }},
      {"tanh sigmoid gelu", {x({3, 4})},
       [](const T& a) { return T{tanh(a[0]), sigmoid(a[0]), gelu(a[0])}; }},
      {"abs", {x({3, 4})}, [](const T& a) { return T{abs(a[0])}; }},
      {"pow", {positive({3, 4}), x({3, 4})}, [](const T& a) { return T{pow(a[0], a[1]), pow(a[0], 3.0)}; }},
      {"log1p expm1", {positive({3, 4}), x({3, 4})}, [](const T& a) { return T{log1p(a[0]), expm1(a[1])}; }},
      {"erf erfinv", {x({3, 4})}, [](const T& a) { return T{erf(a[0]), erfinv(tanh(a[0]) * 0.9)}; }},
      {"sort topK", {x({3, 5})}, [](const T& a) { return T{sort(a[0], 1), sort(a[0], 0, true), topK(a[0], 2).values}; }},
      {"silu softplus logSigmoid mish", {x({3, 4})},
       [](const T& a) { return T{silu(a[0]), softplus(a[0]), logSigmoid(a[0]), mish(a[0])}; }},
      {"elu leakyRelu clamp", {x({3, 4})},
       [](const T& a) { return T{elu(a[0], 1.5), leakyRelu(a[0], 0.2), clamp(a[0], -0.5, 0.7)}; }},
      {"min logsumexp", {x({3, 4, 2})},
       [](const T& a) { return T{min(a[0], {1}), logsumexp(a[0], {0, 2}), logsumexp(a[0], {-1})}; }},
      {"take along axis 1 (repeated indices)", {x({3, 5, 2})},
       [](const T& a) {
         return T{take(a[0], Tensor(Array::of<int32_t>({2, 2}, std::vector<int32_t>{4, 0, 4, 2})), 1)};
       }},
      {"sin cos", {x({3, 4})}, [](const T& a) { return T{sin(a[0]), cos(mul(a[0], 3.0))}; }},
      {"broadcast [3,1] -> [2,3,4]", {x({3, 1})},
       [](const T& a) { return T{broadcastTo(a[0], {2, 3, 4})}; }},
      {"slice pad concat", {x({3, 4}), x({3, 2})},
       [](const T& a) {
         return T{slice(a[0], {1, 0}, {3, -1}), pad(a[1], {1, 0}, {0, 2}), concat({a[0], a[1], a[0]}, -1)};
       }},
      {"where (a mask from a comparison)", {x({3, 4}), x({3, 4})},
       [](const T& a) { return T{where(greater(a[0], a[1]), a[0] * a[1], a[1] - a[0])}; }},
      {"reshape transpose", {x({2, 3, 4})},
       [](const T& a) { return T{reshape(a[0], {6, 4}), transpose(a[0], {2, 0, 1})}; }},
      {"reduce sum mean max", {x({3, 4, 5})},
       [](const T& a) { return T{sum(a[0], {0, 2}), mean(a[0], {1}), max(a[0], {2})}; }},
      {"matmul bias", {x({3, 4}), x({4, 5}), x({5})},
       [](const T& a) { return T{matmul(a[0], a[1], a[2])}; }},
      {"matmul A^T", {x({4, 3}), x({4, 5})},
       [](const T& a) { return T{matmul(a[0], a[1], {}, {.transposeLhs = true})}; }},
      {"matmul B^T", {x({3, 4}), x({5, 4})},
       [](const T& a) { return T{matmul(a[0], a[1], {}, {.transposeRhs = true})}; }},
      {"matmul A^T B^T", {x({4, 3}), x({5, 4})},
       [](const T& a) {
         return T{matmul(a[0], a[1], {}, {.transposeLhs = true, .transposeRhs = true})};
       }},
      {"max_pool2d 2x2, 3x3 stride2 pad1", {x({2, 2, 6, 5})},
       [](const T& a) {
         return T{maxPool2d(a[0]), maxPool2d(a[0], {.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}})};
       }},
      {"avg_pool2d 2x2, 3x2 stride(1,2) pad(1,0)", {x({2, 2, 6, 5})},
       [](const T& a) {
         return T{avgPool2d(a[0]), avgPool2d(a[0], {.window = {3, 2}, .stride = {1, 2}, .padding = {1, 0}})};
       }},
      {"pooling variants: dilated max, dilated avg, avg over the window's inputs", {x({2, 2, 7, 6})},
       [](const T& a) {
         return T{maxPool2d(a[0], {.window = {3, 2}, .stride = {2, 1}, .padding = {2, 1}, .dilation = {2, 3}}),
                  avgPool2d(a[0], {.window = {2, 2}, .stride = {1, 1}, .padding = {1, 0}, .dilation = {3, 2}}),
                  avgPool2d(a[0], {.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .countIncludePad = false})};
       }},
      {"dropout (a fixed key's mask)", {x({4, 6})},
       [](const T& a) { return T{random::dropout(a[0], Tensor(random::key(5)), 0.3)}; }},
      {"embedding (repeated ids)", {x({6, 3})},
       [](const T& a) {
         return T{embedding(a[0], Tensor(Array::of<int32_t>({2, 3}, std::vector<int32_t>{4, 0, 4, 2, 5, 0})))};
       }},
      {"take_along_axis (repeated and unpicked places)", {x({3, 4, 2})},
       [](const T& a) {
         Array at = Array::of<int32_t>({3, 3, 2}, std::vector<int32_t>{3, 0, 3, 3, 1, 0, 0, 0, 2, 1, 2, 2, 1, 3, 1, 1, 0, 2});
         return T{takeAlongAxis(a[0], Tensor(at), 1), takeAlongAxis(a[0], Tensor(at), -2)};
       }},
      {"scatterAdd (repeated indices), into x and from updates", {x({3, 4, 2}), x({3, 3, 2})},
       [](const T& a) {
         Array at = Array::of<int32_t>({3, 3, 2}, std::vector<int32_t>{3, 0, 3, 3, 1, 0, 0, 0, 2, 1, 2, 2, 1, 3, 1, 1, 0, 2});
         return T{scatterAdd(a[0], Tensor(at), a[1], 1), scatterAdd(a[0], Tensor(at), mul(a[1], a[1]), -2)};
       }},
      {"scatter (repeated indices: losers get none), scatterMax, scatterMin", {x({3, 4, 2}), x({3, 3, 2})},
       [](const T& a) {
         Array at = Array::of<int32_t>({3, 3, 2}, std::vector<int32_t>{3, 0, 3, 3, 1, 0, 0, 0, 2, 1, 2, 2, 1, 3, 1, 1, 0, 2});
         return T{scatter(a[0], Tensor(at), mul(a[1], a[1]), 1), scatterMax(a[0], Tensor(at), a[1], 1),
                  scatterMin(a[0], Tensor(at), mul(a[1], 2.0), -2)};
       }},
      {"segmentSum (embedding_backward's VJP; empty segments), segmentMax, segmentMin", {x({6, 2, 2})},
       [](const T& a) {
         const Tensor ids(Array::of<int32_t>({6}, std::vector<int32_t>{3, 0, 3, 1, 0, 3}));
         const Tensor every(Array::of<int32_t>({6}, std::vector<int32_t>{2, 0, 2, 1, 0, 2}));  // no -inf rows
         return T{segmentSum(mul(a[0], a[0]), ids, 5), segmentMax(a[0], every, 3), segmentMin(a[0], every, 3)};
       }},
      {"softmax log_softmax", {x({3, 4, 5})},
       [](const T& a) { return T{softmax(mul(a[0], 2.0), 1), logSoftmax(mul(a[0], 2.0))}; }},
      {"batched matmul bias, A^T B^T", {x({2, 3, 4}), x({2, 4, 5}), x({5})},
       [](const T& a) {
         return T{matmul(a[0], a[1], a[2]),
                  matmul(a[1], a[0], {}, {.transposeLhs = true, .transposeRhs = true})};
       }},
      {"softmax_cross_entropy", {x({5, 7})},
       [](const T& a) {
         Array labels = Array::of<int32_t>({5}, std::vector<int32_t>{0, 6, 3, 3, 1});
         return T{softmaxCrossEntropy(mul(a[0], 3.0), Tensor(labels))};
       }},
  };
  return list;
}

TEST(GradCheckTest, EveryVjpMatchesFiniteDifferencesInF64) {
  std::set<std::string> exercised;
  uint64_t seed = 5000;
  for (const GradCase& c : cases()) {
    SCOPED_TRACE(c.name);
    Checker checker(c, seed += 10);
    for (const std::string& op : checker.run()) exercised.insert(op);
  }
  // Collectives need replicas: CollectiveGradCheckTest checks their VJPs across devices. A
  // convert to f32 and back loses more than the finite difference's step: OperatorTest checks
  // its VJP exactly.
  const std::set<std::string> collectives = {"all_reduce", "all_gather", "reduce_scatter", "ppermute", "all_to_all", "convert"};
  for (const std::string& op : ir::opNames())
    if (ir::differentiation(op) == ir::Differentiation::Vjp && !collectives.count(op)) {
      EXPECT_TRUE(exercised.count(op)) << "no finite-difference case exercises spmd." << op;
    }
}

}  // namespace
}  // namespace spmd

namespace spmd {
namespace {

// stopGradient: the value is its input's, the gradient stops there; a straight-through estimator
// passes the gradient of the identity; nothing of it is left in the compiled step; under pmap the
// inserted pmean averages what does flow.
TEST(GradCheckTest, StopGradientSendsNothingBack) {
  const Array x = randomArray(DType::f64, {3, 4}, 77, -2, 2);
  auto grads = jit([](const Tensor& v) {
    auto [held, dHeld] = value_and_grad([](const Tensor& w) { return sum(w * stopGradient(w), {0, 1}); })(v);
    auto [ste, dSte] = value_and_grad([](const Tensor& w) {
      Tensor hard = w + stopGradient(relu(w) - w);  // relu's value, the identity's gradient
      return sum(hard * hard, {0, 1});
    })(v);
    return std::make_tuple(held, dHeld, ste, dSte);
  });
  auto [held, dHeld, ste, dSte] = grads(x);
  double squares = 0, relus = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.values<double>()[i], r = v > 0 ? v : 0;
    squares += v * v, relus += r * r;
    EXPECT_EQ(dHeld.array().values<double>()[i], v) << i;  // x, not 2x
    EXPECT_DOUBLE_EQ(dSte.array().values<double>()[i], 2 * r) << i;
  }
  EXPECT_DOUBLE_EQ(held.array().values<double>()[0], squares);
  EXPECT_DOUBLE_EQ(ste.array().values<double>()[0], relus);
  EXPECT_EQ(grads.lastProgram().toText().find("stop_gradient"), std::string::npos);
  // Under pmap: each replica's gradient of sum(w * stopGradient(w) * data), averaged.
  auto step = pmap(
      [](const Tensor& w, const Tensor& data) {
        return value_and_grad([&](const Tensor& u) { return sum(u * stopGradient(u) * data, {0, 1}); })(w).second;
      },
      {.inAxes = {replicated, 0}, .devices = "cpu:2"});
  const Array data = randomArray(DType::f64, {2, 3, 4}, 78);
  Array g = step(x, data).array();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double mean = (data.values<double>()[i] + data.values<double>()[12 + i]) / 2;
    EXPECT_NEAR(g.values<double>()[i], x.values<double>()[i] * mean, 1e-15) << i;
  }
  // Integers pass as they are.
  const Array ids = Array::of<int32_t>({2}, std::vector<int32_t>{3, 1});
  EXPECT_EQ(jit([](const Tensor& t) { return stopGradient(t); })(ids).array().values<int32_t>()[0], 3);
}

}  // namespace
}  // namespace spmd
