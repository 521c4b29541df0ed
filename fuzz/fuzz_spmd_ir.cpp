// libFuzzer target: what spmd-opt does with a file before any pass: the input checks, then
// MLIR's parser with the spmd dialect and the verifier (our ops' verifiers and shape rules).
// Any input must parse, be refused, or produce diagnostics; never crash.
#include <cstdint>
#include <string>

#include "ir/SpmdDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/SourceMgr.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "tools/spmd-opt/BoolArrayCheck.h"
#include "tools/spmd-opt/NestingCheck.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mlir::MLIRContext* context = [] {
    mlir::DialectRegistry registry;
    registry.insert<spmd::ir::SpmdDialect, mlir::func::FuncDialect>();  // as spmd-opt
    auto* c = new mlir::MLIRContext(registry, mlir::MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    c->allowUnregisteredDialects(false);
    return c;
  }();
  std::string text(reinterpret_cast<const char*>(data), size);
  if (spmd::checkNesting(text, 512) || spmd::checkBoolArrays(text)) return 0;
  mlir::ScopedDiagnosticHandler quiet(context, [](mlir::Diagnostic&) { return mlir::success(); });
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(text, context);
  if (module) (void)mlir::verify(*module);
  return 0;
}
