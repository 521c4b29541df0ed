// spmd-gather-at-use (FSDP, PmapOptions::fullyShard): runs after spmd-shard-update, which
// leaves each sliced parameter gathered once at the top of the step and alive until its last
// reader in the backward pass. Here every all_gather of a sliced function argument (spmd.shard_of),
// with the reshape/slice chain that rebuilds the whole tensor from the gathered rows, is cloned
// right before each op that reads the whole tensor, and the one at the top is erased. The memory
// plan then frees each gathered tensor after its one reader: a layer's full parameters live while
// that layer runs, in the forward pass and again in the backward pass, and between steps and
// layers each replica keeps only its slice. The gather copies bits, so every reader sees the same
// values as before and the step's results are unchanged.
#include "llvm/ADT/SetVector.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "passes/Passes.h"
#include "passes/Replication.h"

namespace spmd::passes {

#define GEN_PASS_DEF_GATHERATUSE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

// all_gather(argument) followed by the single-reader reshapes and slices that turn the gathered
// rows back into the argument's full tensor (passes/ShardUpdate.cpp's shardArgument).
struct GatherChain {
  SmallVector<Operation*> ops;  // in order, the all_gather first
  Value whole() const { return ops.back()->getResult(0); }
};

bool rebuildsShape(Operation* op) { return llvm::isa<ir::ReshapeOp, ir::SliceOp>(op); }

GatherChain chainFrom(ir::AllGatherOp gather) {
  GatherChain chain{{gather.getOperation()}};
  for (;;) {
    Value end = chain.whole();
    if (!end.hasOneUse()) break;
    Operation* next = *end.getUsers().begin();
    if (!rebuildsShape(next) || next->getBlock() != gather->getBlock()) break;
    chain.ops.push_back(next);
  }
  return chain;
}

void gatherAtEachUse(func::FuncOp function) {
  Block& block = function.getBody().front();
  SmallVector<GatherChain> chains;
  for (Operation& op : block)
    if (auto gather = llvm::dyn_cast<ir::AllGatherOp>(&op))
      if (auto arg = llvm::dyn_cast<BlockArgument>(gather.getInput());
          arg && arg.getOwner() == &block && function.getArgAttr(arg.getArgNumber(), ir::kShardOfAttr))
        chains.push_back(chainFrom(gather));

  OpBuilder b(function.getContext());
  for (GatherChain& chain : chains) {
    Value whole = chain.whole();
    // Readers in block order, each once (an op reading the tensor twice gets one gather).
    llvm::SetVector<Operation*> readers;
    for (OpOperand& use : whole.getUses()) readers.insert(use.getOwner());
    SmallVector<Operation*> ordered(readers.begin(), readers.end());
    llvm::sort(ordered, [](Operation* x, Operation* y) { return x->isBeforeInBlock(y); });
    for (Operation* reader : ordered) {
      if (llvm::isa<func::ReturnOp>(reader)) continue;  // returned whole: keep the gather at the top
      b.setInsertionPoint(reader);
      // At the reader's source line (its layer), so profiles and errors point there.
      Location at = NameLoc::get(b.getStringAttr("parameter gathered for its reader (FSDP)"), reader->getLoc());
      IRMapping mapping;
      for (Operation* op : chain.ops) b.clone(*op, mapping)->setLoc(at);
      Value local = mapping.lookup(whole);
      reader->replaceUsesOfWith(whole, local);
    }
    if (!whole.use_empty()) continue;
    for (Operation* op : llvm::reverse(chain.ops)) op->erase();
  }
}

struct GatherAtUsePass : impl::GatherAtUseBase<GatherAtUsePass> {
  void runOnOperation() override {
    getOperation()->walk([&](func::FuncOp function) {
      if (!function.getBody().empty()) gatherAtEachUse(function);
    });
  }
};

}  // namespace
}  // namespace spmd::passes
