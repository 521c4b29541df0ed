// DiagnosticCollector and source-line extraction from MLIR locations.
#include "compiler/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/base/Error.h"

namespace spmd {

DiagnosticCollector::DiagnosticCollector(mlir::MLIRContext* context)
    : handler_(context, [this](mlir::Diagnostic& diag) {
        // "model.cpp:42: in layer 'stage2.0.conv1': spmd.conv2d: ..." (the layer when the op has one).
        std::string where = sourceLine(diag.getLocation()), layer = layerPath(diag.getLocation());
        text_ += (where.empty() ? "" : where + ": ") + (layer.empty() ? "" : "in layer '" + layer + "': ") +
                 diag.str() + "\n";
        for (const mlir::Diagnostic& note : diag.getNotes())
          text_ += "  note: " + note.str() + "\n";
        return mlir::success();
      }) {}

void DiagnosticCollector::fail(const std::string& prefix) const {
  throw Error(prefix + (text_.empty() ? "(no diagnostic)" : text_));
}

void DiagnosticCollector::failIn(const std::string& where) const {
  if (text_.empty()) throw Error(where + " failed (no diagnostic)");
  throw Error(text_ + "(in " + where + ")");
}

}  // namespace spmd
