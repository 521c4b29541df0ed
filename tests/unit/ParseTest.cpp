// The one parser of switches and numbers (runtime/base/Parse.h) and the environment variables
// that go through it: every accepted spelling, every refusal naming the variable and what it
// accepts, overflow and range errors that say the limit.
#include <gtest/gtest.h>

#include <cstdlib>

#include "TestUtil.h"
#include "runtime/base/Parse.h"
#include "runtime/base/Timeout.h"
#include "runtime/exec/Executor.h"

namespace spmd::runtime {
namespace {

using spmd::testing::errorOf;

// Sets an environment variable for one scope.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedVariable() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(ParseTest, SwitchesAcceptTheUsualWordsInAnyCaseAndNothingElse) {
  for (const char* on : {"1", "true", "TRUE", "On", "yes", "YES"}) EXPECT_TRUE(parseSwitch(on, "X")) << on;
  for (const char* off : {"0", "false", "False", "off", "OFF", "no", "No"}) EXPECT_FALSE(parseSwitch(off, "X")) << off;
  for (const char* bad : {"2", "maybe", "", " 1", "enable"})
    EXPECT_EQ(errorOf([&] { parseSwitch(bad, "SPMD_OVERLAP"); }),
              "SPMD_OVERLAP='" + std::string(bad) + "' is not a switch; use 1, true, on or yes to turn it on and 0, "
              "false, off or no to turn it off");
}

TEST(ParseTest, WholeNumbersDetectOverflowAndSayTheRange) {
  EXPECT_EQ(parseWhole("42", "--steps", 1, 100), 42);
  EXPECT_EQ(parseWhole("-7", "N", -10, 10), -7);
  EXPECT_EQ(parseWhole("9223372036854775807", "N", 0, INT64_MAX), INT64_MAX);
  EXPECT_EQ(errorOf([] { parseWhole("4294967296", "--steps", 1, INT32_MAX); }),
            "--steps is 4294967296, out of range: give a whole number from 1 to 2147483647");
  EXPECT_EQ(errorOf([] { parseWhole("99999999999999999999", "--epochs", 1, 1000000); }),
            "--epochs is 99999999999999999999, out of range: give a whole number from 1 to 1000000");
  for (const char* bad : {"", "12x", "1.5", "0x10", "--3", " ", "1e3"})
    EXPECT_EQ(errorOf([&] { parseWhole(bad, "--batch", 1, 10); }),
              "--batch needs a whole number from 1 to 10, got '" + std::string(bad) + "'");
}

TEST(ParseTest, NumbersAreFiniteAndInRange) {
  EXPECT_EQ(parseNumber("0.25", "--lr", 0, 1), 0.25);
  EXPECT_EQ(parseNumber("1e-3", "--lr", 0, 1), 1e-3);
  EXPECT_EQ(errorOf([] { parseNumber("inf", "--lr", 0, 10); }), "--lr is inf, out of range: give a number from 0 to 10");
  EXPECT_EQ(errorOf([] { parseNumber("nan", "--lr", 0, 10); }), "--lr needs a number from 0 to 10, got 'nan'");
  EXPECT_EQ(errorOf([] { parseNumber("-1", "--lr", 0, 10); }), "--lr is -1, out of range: give a number from 0 to 10");
  EXPECT_EQ(errorOf([] { parseNumber("fast", "--lr", 0, 10); }), "--lr needs a number from 0 to 10, got 'fast'");
}

// The variables users reported: each reads its words the same way, and a bad value is an error
// naming the variable, not a silent default.
TEST(ParseTest, EnvironmentSwitchesAndNumbersGoThroughTheParser) {
  {
    ScopedVariable v("SPMD_DEBUG_NANS", "false");
    EXPECT_FALSE(debugNansFromEnvironment()) << "SPMD_DEBUG_NANS=false turned the debug mode on";
  }
  {
    ScopedVariable v("SPMD_DEBUG_NANS", "ON");
    EXPECT_TRUE(debugNansFromEnvironment());
  }
  {
    ScopedVariable v("SPMD_DEBUG_INFS", "sometimes");
    EXPECT_NE(errorOf([] { debugInfsFromEnvironment(); }).find("SPMD_DEBUG_INFS='sometimes' is not a switch"),
              std::string::npos);
  }
  {
    ScopedVariable v("SPMD_OVERLAP", "off");
    EXPECT_EQ(envSwitch("SPMD_OVERLAP"), false);
  }
  {
    ScopedVariable v("SPMD_COLLECTIVE_TIMEOUT", "1e99");
    EXPECT_EQ(errorOf([] { collectiveTimeoutFromEnvironment(); }),
              "SPMD_COLLECTIVE_TIMEOUT is 1e99, out of range: give a number from 0.001 to 1e+07");
  }
  {
    ScopedVariable v("SPMD_COLLECTIVE_TIMEOUT", "2.5");
    EXPECT_EQ(collectiveTimeoutFromEnvironment().count(), 2500);
  }
  EXPECT_EQ(envWhole("SPMD_SURELY_UNSET_VARIABLE", 0, 1), std::nullopt);
}

}  // namespace
}  // namespace spmd::runtime
