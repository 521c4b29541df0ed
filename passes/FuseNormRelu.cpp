// spmd-fuse-norm-relu: a relu that alone reads a batch_norm_train's result becomes its attribute.
#include "mlir/IR/BuiltinOps.h"
#include "passes/Passes.h"

namespace spmd::passes {

#define GEN_PASS_DEF_FUSENORMRELU
#include "passes/Passes.h.inc"

namespace {

struct FuseNormReluPass : impl::FuseNormReluBase<FuseNormReluPass> {
  void runOnOperation() override {
    getOperation()->walk([](ir::ReluOp relu) {
      auto norm = relu.getInput().getDefiningOp<ir::BatchNormTrainOp>();
      if (!norm || norm.getRelu() || !norm.getResult().hasOneUse()) return;
      norm.setRelu(true);
      relu.getResult().replaceAllUsesWith(norm.getResult());
      relu.erase();
    });
  }
};

}  // namespace
}  // namespace spmd::passes
