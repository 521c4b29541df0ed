// Collects MLIR diagnostics emitted while tracing or compiling into one message with the user's
// file:line, so failures surface as a spmd::Error instead of text on stderr.
#pragma once

#include <string>

#include "mlir/IR/Diagnostics.h"
#include "ir/Locations.h"
#include "mlir/IR/Location.h"

namespace spmd {

class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* context);
  // Everything collected so far, one diagnostic per line; empty if nothing was emitted.
  const std::string& text() const { return text_; }
  // Throws spmd::Error(prefix + collected text).
  [[noreturn]] void fail(const std::string& prefix) const;
  // Throws spmd::Error(collected text + "(in <where>)"): the diagnostics, which name the user's
  // line, come first.
  [[noreturn]] void failIn(const std::string& where) const;

 private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

}  // namespace spmd
