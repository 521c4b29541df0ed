// The main() of our Google Benchmark programs: their own flags and --help/--version through
// CLI11 (tools/cli), Google Benchmark's --benchmark_* flags handed on to it, anything else
// refused by name. `addFlags` adds the program's own flags (none for most).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "tools/cli/Cli.h"

namespace bench {

inline int benchmarkMain(int argc, char** argv, const std::string& program, const std::string& description,
                         const std::function<void(spmd::cli::Flags&)>& addFlags = {},
                         const std::function<int()>& beforeRunning = {}) {
  spmd::cli::Flags app(program, description);
  app.footer("Google Benchmark's flags (--benchmark_filter=REGEX, --benchmark_repetitions=N, "
             "--benchmark_format=json, ...) are passed on to it; --benchmark_list_tests lists the cases.");
  if (addFlags) addFlags(app);
  // Google Benchmark's flags, by their prefix, go to it; the rest is ours.
  std::vector<char*> ours{argv[0]}, theirs{argv[0]};
  for (int i = 1; i < argc; ++i) (std::string(argv[i]).rfind("--benchmark_", 0) == 0 ? theirs : ours).push_back(argv[i]);
  if (auto stop = app.parse(int(ours.size()), ours.data())) return *stop;
  if (beforeRunning)
    if (int status = beforeRunning()) return status;
  int count = int(theirs.size());
  theirs.push_back(nullptr);
  benchmark::Initialize(&count, theirs.data());
  if (benchmark::ReportUnrecognizedArguments(count, theirs.data())) return 2;
  try {  // spmd's errors (a bad SPMD_* switch, a shape) end the run with their message, not terminate
    benchmark::RunSpecifiedBenchmarks();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.what());
    benchmark::Shutdown();
    return 1;
  }
  benchmark::Shutdown();
  return 0;
}

}  // namespace bench
