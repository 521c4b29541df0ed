// Registers the dialects and passes the compiler uses (see Registration.h).
#include "compiler/Registration.h"

#include "ir/SpmdDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

namespace spmd {

void registerDialects(mlir::DialectRegistry& registry) {
  registry.insert<ir::SpmdDialect, mlir::func::FuncDialect>();
}

void registerPasses() {
  static bool done = [] {
    mlir::registerCanonicalizerPass();
    mlir::registerCSEPass();
    mlir::registerSymbolDCEPass();
    passes::registerSpmdPasses();
    return true;
  }();
  (void)done;
}

}  // namespace spmd
