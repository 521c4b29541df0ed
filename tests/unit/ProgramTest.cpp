// A small traced function end to end: its numbers against a host computation, and the lowered
// Program's text form (steps, constants, source lines).
#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/program/StepCost.h"

namespace spmd {
namespace {

// y = mean(relu(x W^T + b) * 2, axis 1)
TEST(ProgramTest, SmallMlpMatchesHostComputation) {
  auto f = jit([](const Tensor& x, const Tensor& w, const Tensor& b) {
    Tensor h = relu(matmul(x, w, b, {.transposeRhs = true}));
    return mean(mul(h, fill(h, 2.0)), {1});
  });
  Array x = testing::randomArray(DType::f32, {5, 7}, 1), w = testing::randomArray(DType::f32, {3, 7}, 2),
        b = testing::randomArray(DType::f32, {3}, 3);
  Tensor y = f(Tensor(x), Tensor(w), Tensor(b));
  Array expected = Array::zeros(DType::f32, {5});
  auto xv = x.values<float>(), wv = w.values<float>(), bv = b.values<float>();
  for (int i = 0; i < 5; ++i) {
    double total = 0;
    for (int j = 0; j < 3; ++j) {
      double acc = bv[j];
      for (int k = 0; k < 7; ++k) acc += double(xv[i * 7 + k]) * wv[j * 7 + k];
      total += 2 * std::max(acc, 0.0);
    }
    expected.values<float>()[i] = static_cast<float>(total / 3);
  }
  testing::expectClose(y.array(), expected, 1e-5, 1e-6, "mlp");

  const std::string& text = f.lastProgramText();
  EXPECT_NE(text.find("matmul (%0, %1, %2) -> (%3) {transpose_lhs = false, transpose_rhs = true}"), std::string::npos) << text;
  // relu and the multiply by the splat 2 are one fused step; the constant is a literal in it.
  EXPECT_NE(text.find("fused (%3) -> (%4) {body = \"%0 = load 0; %1 = relu %0; %2 = const 2; %3 = mul %1 %2; yield %3\"}"),
            std::string::npos) << text;
  EXPECT_EQ(text.find("constant"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce_mean"), std::string::npos) << text;
  EXPECT_NE(text.find("// tests/unit/ProgramTest.cpp:"), std::string::npos) << text;
}

TEST(ProgramTest, BroadcastingBinaryOpsEmitExplicitBroadcasts) {
  auto f = jit([](const Tensor& a, const Tensor& b) { return sub(a, b); });
  Array a = testing::randomArray(DType::f64, {2, 3, 4}, 4), b = testing::randomArray(DType::f64, {3, 1}, 5);
  Tensor y = f(Tensor(a), Tensor(b));
  EXPECT_NE(f.lastTracedIr().find("spmd.broadcast_in_dim"), std::string::npos);
  Array expected = Array::zeros(DType::f64, {2, 3, 4});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k)
        expected.values<double>()[(i * 3 + j) * 4 + k] = a.values<double>()[(i * 3 + j) * 4 + k] - b.values<double>()[j];
  testing::expectClose(y.array(), expected, 0, 0, "broadcast sub");
}

TEST(ProgramTest, ArgmaxAndTreesRoundTrip) {
  auto f = jit([](const Tree& t) {
    Tree out;
    out.set("best", argmax(t.at("scores"), 1));
    out.set("scaled", mul(t.at("scores"), t.at("scores")));
    return out;
  });
  Tree in;
  Array scores = Array::of<float>({2, 3}, std::vector<float>{0.1f, 0.9f, 0.3f, 2.0f, -1.0f, 2.0f});
  in.set("scores", scores);
  Tree out = f(in);
  auto best = out.at("best").array().values<int32_t>();
  EXPECT_EQ(best[0], 1);
  EXPECT_EQ(best[1], 0) << "ties pick the first index";
  EXPECT_FLOAT_EQ(out.at("scaled").array().values<float>()[3], 4.0f);
}

}  // namespace
// A step's cost for the device profile: bytes of its buffers, and a convolution's (each of its
// three ops) and a matmul's multiply-adds counted twice.
TEST(ProgramTest, StepCostsCountBytesAndTheFlopsOfConvolutionsAndMatmuls) {
  runtime::Program p;
  p.buffers = {{DType::f32, {2, 3, 8, 8}, {}}, {DType::f32, {4, 3, 3, 3}, {}}, {DType::f32, {2, 4, 8, 8}, {}},
               {DType::f32, {5, 7}, {}},       {DType::f32, {7, 3}, {}},       {DType::f32, {5, 3}, {}},
               {DType::f32, {7, 5}, {}}};
  const double convFlops = 2.0 * (2 * 4 * 8 * 8) * (3 * 3 * 3);
  runtime::Step forward{"conv2d", {0, 1}, {2}, {}, "t.cpp:1"};
  runtime::Step data{"conv2d_backward_data", {2, 1}, {0}, {}, "t.cpp:2"};
  runtime::Step filter{"conv2d_backward_filter", {0, 2}, {1}, {}, "t.cpp:3"};
  for (const runtime::Step* step : {&forward, &data, &filter}) {
    EXPECT_EQ(runtime::costOf(*step, p).flops, convFlops) << step->op;
    EXPECT_EQ(runtime::costOf(*step, p).bytes, (2 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 2 * 4 * 8 * 8) * 4) << step->op;
  }
  EXPECT_EQ(runtime::costOf({"matmul", {3, 4}, {5}, {}, "t.cpp:4"}, p).flops, 2.0 * 5 * 3 * 7);
  EXPECT_EQ(runtime::costOf({"matmul", {6, 4}, {5}, {{"transpose_lhs", true}}, "t.cpp:5"}, p).flops, 2.0 * 5 * 3 * 7);
  runtime::Step add{"add", {3, 3}, {3}, {}, "t.cpp:6"};
  EXPECT_EQ(runtime::costOf(add, p).flops, 0.0);
  EXPECT_EQ(runtime::costOf(add, p).bytes, 3 * 35 * 4);
}

}  // namespace spmd
