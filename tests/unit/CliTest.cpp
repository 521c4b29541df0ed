// tools/cli: the flags every spmd program shares. Values are range-checked by our parser (no
// clamped overflow, no octal), unknown flags and missing values are refused by name, and
// --help / --version stop the program with status 0.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tools/cli/Cli.h"

namespace {

struct Parsed {
  std::optional<int> stop;
  std::string out, err;
};

// Parses `args` (after the program's name), capturing what it prints.
Parsed parse(spmd::cli::Flags& flags, std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  Parsed p;
  p.stop = flags.parse(int(argv.size()), argv.data());
  p.out = testing::internal::GetCapturedStdout();
  p.err = testing::internal::GetCapturedStderr();
  return p;
}

struct Program {
  int64_t batch = 128;
  int steps = 20;
  double lr = 0.05;
  std::string mode = "sgd";
  uint64_t seed = 0;
  spmd::cli::Flags flags{"prog", "a test program"};
  Program() {
    flags.whole("--batch", batch, 1, int64_t(1) << 30, "batch")
        .whole("--steps", steps, 1, 1000, "steps")
        .number("--lr", lr, 0, 10, "rate")
        .oneOf("--mode", mode, {"sgd", "adam"}, "mode")
        .whole("--seed", seed, uint64_t(INT64_MAX), "seed");
  }
  Parsed parse(std::vector<std::string> args) { return ::parse(flags, std::move(args)); }
};

TEST(CliTest, ValuesArriveInBothSpellings) {
  Program p;
  Parsed r = p.parse({"--batch", "64", "--steps=7", "--lr", "1e-3", "--mode=adam", "--seed", "9223372036854775807"});
  EXPECT_FALSE(r.stop) << r.err;
  EXPECT_EQ(p.batch, 64);
  EXPECT_EQ(p.steps, 7);
  EXPECT_DOUBLE_EQ(p.lr, 1e-3);
  EXPECT_EQ(p.mode, "adam");
  EXPECT_EQ(p.seed, uint64_t(INT64_MAX));
  Program twice;  // the last of a repeated flag counts
  EXPECT_FALSE(twice.parse({"--steps", "3", "--steps", "5"}).stop);
  EXPECT_EQ(twice.steps, 5);
}

TEST(CliTest, BadCommandLinesNameTheFlagAndExit2) {
  const std::string help = " (see --help)\n";
  std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--batch", "99999999999999999999"},
       "--batch is 99999999999999999999, out of range: give a whole number from 1 to 1073741824"},
      {{"--steps", "4294967297"}, "--steps is 4294967297, out of range: give a whole number from 1 to 1000"},
      {{"--steps", "0x10"}, "--steps needs a whole number from 1 to 1000, got '0x10'"},
      {{"--steps=-3"}, "--steps is -3, out of range: give a whole number from 1 to 1000"},
      {{"--seed", "-1"}, "--seed is -1, out of range: give a whole number from 0 to 9223372036854775807"},
      {{"--lr", "nan"}, "--lr needs a number from 0 to 10, got 'nan'"},
      {{"--lr", "11"}, "--lr is 11, out of range: give a number from 0 to 10"},
      {{"--mode", "rmsprop"}, "--mode must be one of sgd|adam, got 'rmsprop'"},
      {{"--bath", "3"}, "unknown flag '--bath'"},
      {{"--bath=3", "--x"}, "unknown flag '--bath'; unknown flag '--x'"},
      {{"--batch"}, "--batch needs a value"},
  };
  for (const auto& [args, message] : cases) {
    Program p;
    Parsed r = p.parse(args);
    ASSERT_TRUE(r.stop) << args[0];
    EXPECT_EQ(*r.stop, 2) << args[0];
    EXPECT_EQ(r.err, "prog: error: " + message + help) << args[0];
    EXPECT_EQ(p.batch, 128) << "a refused value must not be stored";
  }
}

TEST(CliTest, HelpAndVersionStopWithZero) {
  for (const char* flag : {"--help", "-h", "--version"}) {
    Program p;
    Parsed r = p.parse({flag});
    ASSERT_TRUE(r.stop) << flag;
    EXPECT_EQ(*r.stop, 0) << flag;
    EXPECT_EQ(r.err, "") << flag;
  }
  Program p;
  const std::string help = p.parse({"--help"}).out;
  EXPECT_NE(help.find("--batch N=128"), std::string::npos) << help;
  EXPECT_NE(help.find("--mode sgd|adam=sgd"), std::string::npos) << help;
  Program q;
  EXPECT_EQ(q.parse({"--version"}).out, std::string("prog (spmd ") + spmd::cli::version() + ")\n");
}

TEST(CliTest, SwitchesPositionalsAndOptionalValues) {
  bool print = false, plot = true, listed = false;
  std::string file, backend;
  auto declare = [&](spmd::cli::Flags& flags) {
    print = false, plot = true, listed = false, file.clear(), backend.clear();
    flags.flag("--print", print, "print")
        .flag("--no-plot", plot, "no plot", false)
        .positional("FILE", file, "the file", "FILE")
        .optionalText("--kernels", backend, listed, "list kernels", "[BACKEND]");
  };
  {
    spmd::cli::Flags flags("prog", "switches");
    declare(flags);
    Parsed r = parse(flags, {"a.spmd", "--print", "--no-plot"});
    EXPECT_FALSE(r.stop) << r.err;
    EXPECT_TRUE(print);
    EXPECT_FALSE(plot);
    EXPECT_EQ(file, "a.spmd");
    EXPECT_FALSE(listed) << "--kernels was not given";
  }
  {
    spmd::cli::Flags flags("prog", "switches");
    declare(flags);
    Parsed r = parse(flags, {"--kernels"});
    EXPECT_FALSE(r.stop) << r.err;
    EXPECT_TRUE(listed) << "--kernels without a value is given";
    EXPECT_EQ(backend, "");
    EXPECT_FALSE(print);
    EXPECT_TRUE(plot);
  }
  {
    spmd::cli::Flags flags("prog", "switches");
    declare(flags);
    Parsed r = parse(flags, {"--kernels=sim"});
    EXPECT_FALSE(r.stop) << r.err;
    EXPECT_TRUE(listed);
    EXPECT_EQ(backend, "sim");
  }
}

TEST(CliTest, ExactlyOneSubcommandRunsWithItsOwnFlags) {
  struct Modes {
    int width = 2, repeats = 1;
    spmd::cli::Flags flags{"prog", "modes"};
    spmd::cli::Flags& step = flags.subcommand("step", "a step");
    spmd::cli::Flags& allreduce = flags.subcommand("allreduce", "an all-reduce");
    Modes() {
      step.whole("--width", width, 1, 64, "width");
      allreduce.whole("--repeats", repeats, 1, 10, "repeats");
    }
  };
  {
    Modes m;
    Parsed r = parse(m.flags, {"step", "--width", "8"});
    EXPECT_FALSE(r.stop) << r.err;
    EXPECT_TRUE(m.step.given());
    EXPECT_FALSE(m.allreduce.given());
    EXPECT_EQ(m.width, 8);
  }
  {
    Modes m;
    Parsed r = parse(m.flags, {"allreduce", "--repeats=3"});
    EXPECT_FALSE(r.stop) << r.err;
    EXPECT_TRUE(m.allreduce.given());
    EXPECT_EQ(m.repeats, 3);
  }
  {
    Modes m;
    Parsed r = parse(m.flags, {});
    ASSERT_TRUE(r.stop);
    EXPECT_EQ(*r.stop, 2);
    EXPECT_NE(r.err.find("prog: error: "), std::string::npos) << r.err;
  }
  {
    Modes m;  // a subcommand's flag is its own
    Parsed r = parse(m.flags, {"step", "--repeats", "3"});
    ASSERT_TRUE(r.stop);
    EXPECT_EQ(*r.stop, 2);
  }
}

}  // namespace
