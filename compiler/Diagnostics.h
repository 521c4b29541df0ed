// Collects MLIR diagnostics emitted while tracing or compiling into one message with the user's
// file:line, so failures surface as a spmd::Error instead of text on stderr.
#pragma once

#include <string>

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"

namespace spmd {

// "file.cpp:42" for the first file location inside `loc`; "" when there is none.
std::string sourceLine(mlir::Location loc);
// The nn layer path of an op ("stage2.0.conv1": the name of the NameLoc around its file
// location), or "" when it was not traced inside a layer.
std::string layerPath(mlir::Location loc);

class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* context);
  // Everything collected so far, one diagnostic per line; empty if nothing was emitted.
  const std::string& text() const { return text_; }
  // Throws spmd::Error(prefix + collected text).
  [[noreturn]] void fail(const std::string& prefix) const;

 private:
  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

}  // namespace spmd
