// spmd-opt on hostile input: nesting deep enough to overflow MLIR's recursive parser, and boolean
// arrays with integer elements (which crash MLIR 19's printer; found by fuzz_spmd_ir), are refused
// with file:line:column before parsing; ordinary nesting and true/false arrays still parse.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "TestUtil.h"
#include "tools/spmd-opt/BoolArrayCheck.h"
#include "tools/spmd-opt/NestingCheck.h"

namespace spmd {
namespace {

TEST(SpmdOptInputTest, NestingCheckCountsBracketsOutsideStringsAndComments) {
  EXPECT_FALSE(checkNesting("func.func @f() -> (tensor<2xf32>) { return }", 3));
  EXPECT_FALSE(checkNesting("// ((((((((\n\"[[[[[[[[\" {}", 1)) << "comments and strings do not nest";
  auto problem = checkNesting("a\n  [[[[x]]]]", 3);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->line, 2u);
  EXPECT_EQ(problem->column, 6u);
  EXPECT_NE(problem->message.find("more than 3 levels deep"), std::string::npos);
}

TEST(SpmdOptInputTest, BooleanArraysWithIntegerElementsAreRefused) {
  EXPECT_FALSE(checkBoolArrays("{a = array<i1: true, false>, b = array<i64: 1, 0>, c = array<i1>}"));
  EXPECT_FALSE(checkBoolArrays("// array<i1: 1>\n\"array<i1: 1>\""));
  for (const char* bad : {"{a = array<i1: 1, 1>}", "{a = array< i01 : true, 0>}", "{a = array<i001:tru>}"}) {
    auto problem = checkBoolArrays(bad);
    ASSERT_TRUE(problem) << bad;
    EXPECT_EQ(problem->column, 6u) << bad;
    EXPECT_NE(problem->message.find("takes the elements true and false"), std::string::npos);
  }
  // The fuzzer's input, through spmd-opt: an error at its line, not a crash.
  auto run = testing::runCommand(std::string(SPMD_OPT_PATH) + " " SPMD_SOURCE_DIR
                                 "/fuzz/regressions/fuzz_spmd_ir/bool-array-integer-elements.mlir");
  EXPECT_EQ(run.status, 1) << run.output.substr(0, 500);
  EXPECT_NE(run.output.find("bool-array-integer-elements.mlir:8:"), std::string::npos) << run.output.substr(0, 500);
  EXPECT_NE(run.output.find("a boolean array (array<i1: ...>) takes the elements true and false"), std::string::npos)
      << run.output.substr(0, 500);
}

TEST(SpmdOptInputTest, DeeplyNestedInputIsAnErrorNotACrash) {
  auto path = std::filesystem::temp_directory_path() / ("spmd-deep-" + std::to_string(::getpid()) + ".mlir");
  for (const char* open : {"[", "{", "("}) {
    {
      std::ofstream out(path);
      out << "module attributes {test.deep = ";
      for (int i = 0; i < 200000; ++i) out << open;
      out << "\n}\n";
    }
    auto run = testing::runCommand(std::string(SPMD_OPT_PATH) + " " + path.string());
    EXPECT_EQ(run.status, 1) << run.output.substr(0, 500);
    EXPECT_NE(run.output.find(path.string() + ":1:"), std::string::npos) << run.output.substr(0, 500);
    EXPECT_NE(run.output.find("error: the input nests brackets more than 512 levels deep"), std::string::npos)
        << run.output.substr(0, 500);
  }
  {  // 400 levels of array attribute parse fine.
    std::ofstream out(path);
    out << "module attributes {test.deep = ";
    for (int i = 0; i < 400; ++i) out << "[";
    for (int i = 0; i < 400; ++i) out << "]";
    out << "} {}\n";
  }
  auto ok = testing::runCommand(std::string(SPMD_OPT_PATH) + " " + path.string());
  EXPECT_EQ(ok.status, 0) << ok.output.substr(0, 500);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace spmd
