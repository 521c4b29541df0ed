// Flags for every spmd program (samples, spmd-run, benchmarks, test drivers) through CLI11, so
// they all read alike: one --help layout, --version, "--flag value" and "--flag=value", and an
// unknown flag or a bad value rejected with the flag named. Numbers go through the one parser of
// flags and environment variables (runtime/base/Parse.h): CLI11 2.1 would clamp an overflowing
// 64-bit integer to its limit and read "010" as octal; ours refuses both, naming the range.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spmd::cli {

// An App named `program`, described by `description`, with --version (spmd's version).
void configure(CLI::App& app, const std::string& program);

// --flag N: a whole number in [min, max] into `target`; the help shows its current value as
// the default.
CLI::Option* whole(CLI::App& app, const std::string& flag, int64_t& target, int64_t min, int64_t max,
                   const std::string& help);
CLI::Option* whole(CLI::App& app, const std::string& flag, int& target, int min, int max, const std::string& help);
CLI::Option* whole(CLI::App& app, const std::string& flag, uint64_t& target, uint64_t max, const std::string& help);
// --flag X: a finite number in [min, max].
CLI::Option* number(CLI::App& app, const std::string& flag, double& target, double min, double max,
                    const std::string& help);
// --flag WORD: one of `words`.
CLI::Option* oneOf(CLI::App& app, const std::string& flag, std::string& target, const std::vector<std::string>& words,
                   const std::string& help);
// --flag TEXT: any text (a path, a device list).
CLI::Option* text(CLI::App& app, const std::string& flag, std::string& target, const std::string& help,
                  const std::string& typeName = "TEXT");

// Parses argv. Returns nullopt when the program should run; else the exit status after --help or
// --version (0, printed to stdout) or a bad command line (2, "program: error: ..." on stderr).
std::optional<int> parse(CLI::App& app, int argc, char** argv);

// spmd's version, "0.1.0".
const char* version();

}  // namespace spmd::cli
