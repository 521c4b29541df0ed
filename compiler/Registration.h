// Registration of everything the compiler uses: dialects (spmd, func) and the pipeline's passes.
// Used by spmd-opt and by the pipeline itself so both see the same set.
#pragma once

namespace mlir {
class DialectRegistry;
}

namespace spmd {
void registerDialects(mlir::DialectRegistry& registry);
// Registers every pass the pipeline runs as a command-line pass (idempotent).
void registerPasses();
}  // namespace spmd
