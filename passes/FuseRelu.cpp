// spmd-fuse-relu: a relu that alone reads a batch_norm_train's or a conv2d's result becomes that
// op's `relu` attribute.
#include "mlir/IR/BuiltinOps.h"
#include "passes/Passes.h"

namespace spmd::passes {

#define GEN_PASS_DEF_FUSERELU
#include "passes/Passes.h.inc"

namespace {

// Folds `relu` into `producer` when the relu is the only reader of its result.
template <class Producer>
void fold(ir::ReluOp relu, Producer producer) {
  if (!producer || producer.getRelu() || !producer.getResult().hasOneUse()) return;
  producer.setRelu(true);
  relu.getResult().replaceAllUsesWith(producer.getResult());
  relu.erase();
}

struct FuseReluPass : impl::FuseReluBase<FuseReluPass> {
  void runOnOperation() override {
    getOperation()->walk([](ir::ReluOp relu) {
      mlir::Operation* producer = relu.getInput().getDefiningOp();
      if (auto norm = llvm::dyn_cast_or_null<ir::BatchNormTrainOp>(producer)) return fold(relu, norm);
      if (auto conv = llvm::dyn_cast_or_null<ir::Conv2dOp>(producer)) return fold(relu, conv);
    });
  }
};

}  // namespace
}  // namespace spmd::passes
