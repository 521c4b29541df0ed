// Signature keys, recompile reasons, and tracing -> compiling for jit and pmap.
#include "frontend/CompileLog.h"

#include "runtime/base/Timeline.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "frontend/Trace.h"
#include "runtime/base/Parse.h"

namespace spmd::detail {

std::string signatureOf(const std::vector<Tensor>& leaves, const std::string& structure,
                        const std::vector<std::string>& tags) {
  std::string key = structure + "|";
  for (size_t i = 0; i < leaves.size(); ++i)
    key += (i < tags.size() ? tags[i] : std::string()) + leaves[i].typeString() + ";";
  return key;
}

// Why `now` differs from `before`: the first differing input leaf (by its path), or the structure.
std::string explain(const std::string& before, const std::string& now, const std::vector<std::string>& names) {
  if (before.empty()) return "first call";
  auto split = [](const std::string& key) {
    std::vector<std::string> parts;
    size_t bar = key.find('|'), start = bar + 1;
    for (size_t end; (end = key.find(';', start)) != std::string::npos; start = end + 1)
      parts.push_back(key.substr(start, end - start));
    return std::pair{key.substr(0, bar), parts};
  };
  auto [structBefore, typesBefore] = split(before);
  auto [structNow, typesNow] = split(now);
  if (structBefore != structNow) {
    // A static argument's new value (Flatten.h writes "static <path> = <value>;").
    auto parts = [](const std::string& text) {
      std::vector<std::string> out;
      for (size_t start = 0, end; (end = text.find(';', start)) != std::string::npos; start = end + 1)
        out.push_back(text.substr(start, end - start));
      return out;
    };
    std::vector<std::string> was = parts(structBefore), is = parts(structNow);
    for (size_t i = 0; i < std::min(was.size(), is.size()); ++i) {
      size_t eqWas = was[i].find(" = "), eqIs = is[i].find(" = ");
      if (was[i] != is[i] && was[i].rfind("static ", 0) == 0 && is[i].rfind("static ", 0) == 0 &&
          was[i].substr(0, eqWas) == is[i].substr(0, eqIs))
        return "static " + was[i].substr(7, eqWas - 7) + " was " + was[i].substr(eqWas + 3) + ", now " +
               is[i].substr(eqIs + 3) + " (a static value is part of the compile key; pass a scalar Tensor "
               "to trace it instead)";
    }
    return "the argument structure (tree keys, arity or static values) changed";
  }
  for (size_t i = 0; i < typesNow.size(); ++i)
    if (i >= typesBefore.size() || typesBefore[i] != typesNow[i])
      return (i < names.size() ? names[i] : "input leaf " + std::to_string(i)) + " was " +
             (i < typesBefore.size() ? typesBefore[i] : "absent") + ", now " + typesNow[i];
  return "the signature changed";
}

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (char c : text) hash = (hash ^ uint8_t(c)) * 1099511628211ull;
  return hash;
}

void CompileLog::beginCompile(const std::string& signature, const std::string& what,
                              const std::vector<std::string>& names) {
  lastReason_ = explain(lastSignature_, signature, names);
  compilingSignature_ = signature;
  compilingWhat_ = what;
  compileStart_ = std::chrono::steady_clock::now();
  compiling_ = true;
  if (runtime::envSwitch("SPMD_LOG_COMPILES").value_or(false))
    std::fprintf(stderr, "spmd: compiling %s (%s)\n", what.c_str(), lastReason_.c_str());
}

void CompileLog::firstStepDone() {
  if (compiling_) {
    const auto now = std::chrono::steady_clock::now();
    lastCompileSeconds_ = std::chrono::duration<double>(now - compileStart_).count();
    if (runtime::timeline::on())
      runtime::timeline::span(runtime::timeline::hostTrack(), "compile " + compilingWhat_, "compile", compileStart_, now,
                              "trace, passes, lowering, replica group and the first run: " + lastReason_);
  }
  compiling_ = false;
}

runtime::Program CompileLog::compileTrace(Trace& trace, const CompileOptions& options,
                                          const std::string& name) {
  std::string text;
  llvm::raw_string_ostream os(text);
  trace.module().print(os, mlir::OpPrintingFlags().enableDebugInfo(true, false));
  lastTracedIr_ = text;
  // Dumps of each function and signature go to their own directory: the name, then a hash
  // (FNV-1a) of the signature and the traced IR, so nothing another compilation wrote is replaced.
  uint64_t hash = fnv1a(compilingSignature_ + "\n" + text);
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "-%08llx", static_cast<unsigned long long>(hash & 0xffffffffull));
  CompileOptions withName = options;
  // The name is the user's (PmapOptions::name, any text): as a path component, every character
  // but letters, digits, '_' and '-' becomes '_', so that "../x" or "a/b" stays one directory
  // inside the dump directory.
  std::string safe = name;
  for (char& c : safe)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '_';
  withName.dumpName = safe + suffix;
  lastDumpDir_ = dumpDirectory(withName);
  runtime::Program program = compile(trace.module(), withName);
  program.name = name;
  lastProgramText_ = program.toText();
  lastProgram_ = program;
  ++compileCount_;
  return program;
}

}  // namespace spmd::detail
