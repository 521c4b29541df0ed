// spmd-replication: runs the replication analysis on every mapped function and marks the ops
// whose results vary across the axis (`spmd.varying`), and on a function mapped over a mesh the
// mesh axes they vary over (`spmd.varies_over`, passes/MeshVariation.h), so dumps show where
// values vary.
#include "mlir/IR/BuiltinOps.h"
#include "passes/Passes.h"
#include "passes/MeshVariation.h"
#include "passes/Replication.h"

namespace spmd::passes {

#define GEN_PASS_DEF_REPLICATION
#include "passes/Passes.h.inc"

namespace {

struct ReplicationPass : impl::ReplicationBase<ReplicationPass> {
  void runOnOperation() override {
    getOperation()->walk([](mlir::FunctionOpInterface function) {
      if (mappedAxis(function).empty()) return;
      ReplicationAnalysis(function).annotate(function);
      MeshVariation(function).annotate(function);
    });
  }
};

}  // namespace
}  // namespace spmd::passes
