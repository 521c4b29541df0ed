// Flags for every spmd program (samples, spmd-run, benchmarks, test drivers) through CLI11, so
// they all read alike: one --help layout, --version, "--flag value" and "--flag=value", and an
// unknown flag or a bad value rejected with the flag named. Numbers go through the one parser of
// flags and environment variables (runtime/base/Parse.h): CLI11 2.1 would clamp an overflowing
// 64-bit integer to its limit and read "010" as octal; ours refuses both, naming the range.
//
// CLI11 2.1 is header-only: a file that includes it compiles all of its App (~6 s at -O3, more
// under the sanitizers). So only Cli.cpp does; programs hold a Flags, whose App is hidden.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace spmd::cli {

// A program's flags (or a subcommand's: subcommand()). Each adder returns *this, to chain; a
// target is written when its flag is parsed, and keeps its value (shown as the default in
// --help) when the flag is not given.
class Flags {
 public:
  // `program` names it in --help, --version (with spmd's version) and in its errors.
  Flags(const std::string& program, const std::string& description);
  ~Flags();
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // --flag N: a whole number in [min, max].
  Flags& whole(const std::string& flag, int64_t& target, int64_t min, int64_t max, const std::string& help);
  Flags& whole(const std::string& flag, int& target, int min, int max, const std::string& help);
  Flags& whole(const std::string& flag, uint64_t& target, uint64_t max, const std::string& help);
  // --flag X: a finite number in [min, max].
  Flags& number(const std::string& flag, double& target, double min, double max, const std::string& help);
  // --flag WORD: one of `words`.
  Flags& oneOf(const std::string& flag, std::string& target, const std::vector<std::string>& words,
               const std::string& help);
  // --flag TEXT: any text (a path, a device list).
  Flags& text(const std::string& flag, std::string& target, const std::string& help,
              const std::string& typeName = "TEXT");
  // --flag [TEXT]: `given` is set when the flag is there, `target` to its value if it has one.
  Flags& optionalText(const std::string& flag, std::string& target, bool& given, const std::string& help,
                      const std::string& typeName);
  // --flag: `target` becomes true (`value`) when given.
  Flags& flag(const std::string& flag, bool& target, const std::string& help, bool value = true);
  // NAME: the first argument that is no flag.
  Flags& positional(const std::string& name, std::string& target, const std::string& help, const std::string& typeName);
  // Text at the end of --help.
  Flags& footer(const std::string& text);

  // A subcommand ("prog step --width 2"), owned by this; once one is declared, exactly one must
  // be given. After parse(), its given() says whether it was the one.
  Flags& subcommand(const std::string& name, const std::string& description);
  bool given() const;

  // Parses argv. Returns nullopt when the program should run; else the exit status after --help
  // or --version (0, printed to stdout) or a bad command line (2, "program: error: ..." on stderr).
  std::optional<int> parse(int argc, char** argv);

 private:
  explicit Flags(CLI::App* subcommand);
  void notePresence();  // optionalText's `given`, here and in the subcommands
  std::unique_ptr<CLI::App> owned_;
  CLI::App* app_;
  std::vector<std::unique_ptr<Flags>> subcommands_;
  std::vector<std::pair<CLI::Option*, bool*>> presence_;
};

// spmd's version, "0.1.0".
const char* version();

}  // namespace spmd::cli
