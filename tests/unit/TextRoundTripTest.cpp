// Every text form round-trips every double: formatReal/parseReal (shortest decimal, inf, -inf,
// nan), fused bodies (the "const" literal), Program text, and Program files (attributes and
// fused literals), so a step built with -INFINITY or NaN constants compiles, saves and runs.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/program/FusedBody.h"
#include "runtime/program/ProgramFile.h"
#include "runtime/base/RealText.h"

namespace spmd {
namespace {

using runtime::formatReal;
using runtime::parseReal;

bool sameDouble(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

std::vector<double> specialValues() {
  using L = std::numeric_limits<double>;
  return {0.0, -0.0, 1.0, -1.0, 0.1, 1.0 / 3.0, 1e-5, 5e-4, L::max(), L::lowest(), L::min(),
          L::denorm_min(), -L::denorm_min(), L::epsilon(), L::infinity(), -L::infinity(),
          L::quiet_NaN(), 123456789012345678.0, double(std::numeric_limits<float>::max()),
          double(std::numeric_limits<float>::denorm_min())};
}

TEST(TextRoundTripTest, EveryDoubleSurvivesFormatAndParse) {
  std::vector<double> values = specialValues();
  std::mt19937_64 bits(7);
  for (int i = 0; i < 100000; ++i) values.push_back(std::bit_cast<double>(bits()));  // any pattern
  for (double v : values) {
    std::string text = formatReal(v);
    double back = 0;
    ASSERT_TRUE(parseReal(text, back)) << text;
    ASSERT_TRUE(sameDouble(back, v)) << text;
  }
  EXPECT_EQ(formatReal(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(formatReal(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(formatReal(std::nan("")), "nan");
  EXPECT_EQ(formatReal(0.1), "0.1");
  double out = 0;
  for (const char* bad : {"", "1.5x", "--1", "one", "1 2", "0x10"}) EXPECT_FALSE(parseReal(bad, out)) << bad;
}

TEST(TextRoundTripTest, FusedBodyConstantsRoundTrip) {
  for (double v : specialValues()) {
    runtime::FusedBody body = runtime::FusedBody::parse("%0 = const " + formatReal(v) + "; yield %0");
    EXPECT_TRUE(sameDouble(body.instrs[0].value, v)) << formatReal(v);
  }
  try {
    runtime::FusedBody::parse("%0 = const 1.5.2; yield %0");
    ADD_FAILURE() << "a malformed literal must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("const needs a number (digits, inf, -inf or nan), got '1.5.2'"),
              std::string::npos) << e.what();
  }
}

TEST(TextRoundTripTest, StepsWithInfiniteAndNanConstantsCompileSaveAndRun) {
  // The fused kernel carries -inf, nan and 1/3 literals; the Program file keeps them.
  auto dir = std::filesystem::temp_directory_path() / ("spmd-text-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto f = jit(
      [](const Tensor& x) {
        return std::tuple{maximum(x, fill(x, -INFINITY)), add(mul(x, fill(x, 0.0)), fill(x, NAN)),
                          mul(x, fill(x, 1.0 / 3.0))};
      },
      {.dumpDir = dir.string()});
  Array x = Array::of<float>({3}, std::vector<float>{-INFINITY, 2.f, -5.f});
  auto [m, n, third] = f(x);
  auto mv = m.array().values<float>();
  EXPECT_EQ(mv[0], -INFINITY);
  EXPECT_EQ(mv[1], 2.f);
  for (float v : n.array().values<float>()) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(third.array().values<float>()[1], float(2.0 * (1.0 / 3.0)));
  const std::string& text = f.lastProgramText();
  EXPECT_NE(text.find("const -inf"), std::string::npos) << text;
  EXPECT_NE(text.find("const nan"), std::string::npos) << text;
  EXPECT_NE(text.find("const 0.3333333432674408"), std::string::npos) << text << "1/3 as an f32, exactly";

  runtime::Program saved = runtime::loadProgram((std::filesystem::path(f.lastDumpDir()) / "program.spmd").string());
  EXPECT_EQ(saved.toText(), f.lastProgram().toText());
  // A float attribute of every special value survives the file: one batch_norm_infer step per
  // value, as its epsilon (the catalog's one real-valued attribute).
  runtime::Program p;
  p.name = "probe";
  p.buffers.push_back({DType::f32, {2, 3, 4, 4}, {}});
  p.inputs = {0};
  std::vector<double> values = specialValues();
  for (size_t i = 0; i < values.size(); ++i) {
    p.buffers.push_back({DType::f32, {2, 3, 4, 4}, {}});
    p.steps.push_back({"batch_norm_infer", {0}, {int(i) + 1}, {{"epsilon", values[i]}}, "probe.cpp:1"});
    p.outputs.push_back(int(i) + 1);
  }
  std::string file = (dir / "probe.spmd").string();
  runtime::saveProgram(p, file);
  runtime::Program back = runtime::loadProgram(file);
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_TRUE(sameDouble(back.steps[i].real("epsilon"), values[i])) << formatReal(values[i]);
  EXPECT_EQ(back.toText(), p.toText());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace spmd
