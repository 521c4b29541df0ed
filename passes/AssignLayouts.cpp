// spmd-assign-layouts: give activations the backend's layout (blocked on the CPU, channels-last
// on CUDA) where its kernels read and write it, and insert spmd.relayout where a value must
// change layout.
#include <map>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "passes/Passes.h"
#include "runtime/program/Layouts.h"

namespace spmd::passes {

#define GEN_PASS_DEF_ASSIGNLAYOUTS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

class Assigner {
 public:
  Assigner(Block& block, const std::string& layout) : block_(block), layouts_(layout) {}

  void run() {
    for (Operation& op : llvm::make_early_inc_range(block_)) {
      if (llvm::isa<ir::RelayoutOp>(op)) continue;  // made here, or written by the user: kept
      if (llvm::isa<func::ReturnOp>(op)) {
        requirePlain(&op);  // results leave plain: hosts, checkpoints and other backends read them
        continue;
      }
      // A convert between f32 and bf16 (spmd-widen-bf16's widenings and roundings around every bf16
      // op) reads and writes each element at one index: like an elementwise op, it runs in the
      // layout its operand arrives in, so activations stay blocked through a bf16 step's roundings.
      if (llvm::isa<ir::FusedOp>(op) || ir::isElementwise(&op) || ir::isBf16Rounding(&op))
        assignElementwise(&op);
      else
        assignKernel(&op);
    }
  }

 private:
  // The backend's layout for `type`, or "" where it has none (not an f32 NCHW activation whose
  // channels fill whole blocks; bf16 too where `bf16Too`: the roundings', and the results of the
  // convolutions spmd-widen-bf16 kept in bf16 for a backend's bf16 kernels; channels-last takes
  // every float type: the CUDA kernels that read it are written for each).
  std::string blockedFor(Type type, bool bf16Too = false) const {
    auto tensor = llvm::dyn_cast<RankedTensorType>(type);
    if (!tensor) return "";
    const Type element = tensor.getElementType();
    const bool takes = layouts_.channelsLast() ? llvm::isa<FloatType>(element)
                                               : element.isF32() || (bf16Too && element.isBF16());
    if (!takes) return "";
    return layouts_.blockedLayout(tensor.getShape());
  }

  // An op of a backend kernel: blocked operands where the kernel does not read them go plain;
  // results the kernel writes blocked become blocked, except a normalization's, which follow
  // its data input (oneDNN normalizes in the input's layout; a change would cost a reorder).
  void assignKernel(Operation* op) {
    std::string name = op->getName().stripDialect().str();
    llvm::ArrayRef<int64_t> axes;
    if (auto attr = op->getAttrOfType<DenseI64ArrayAttr>("axes")) axes = attr.asArrayRef();
    for (OpOperand& operand : op->getOpOperands())
      if (!ir::layoutOf(operand.get().getType()).empty() &&
          !layouts_.readsBlocked(name, static_cast<int>(operand.getOperandNumber()), axes))
        operand.set(relaid(operand.get(), "", op));
    const bool followsInput = name.starts_with("batch_norm");
    const Value data = followsInput ? op->getOperand(name == "batch_norm_train_backward" ? 1 : 0) : Value();
    for (OpResult result : op->getResults()) {
      if (!layouts_.writesBlocked(name, static_cast<int>(result.getResultNumber()))) continue;
      std::string layout = blockedFor(result.getType(), /*bf16Too=*/true);  // bf16: a kernel kept in bf16
      if (followsInput && ir::layoutOf(data.getType()) != layout) continue;
      if (!layout.empty()) result.setType(ir::withLayout(result.getType(), layout));
    }
  }

  // Elementwise ops and fused bodies read every full-size operand at the result's index, so they
  // run in any layout their operands and results share: blocked when an operand arrives blocked
  // (the others are relaid to match), plain otherwise. Smaller operands a fused body broadcasts
  // (per-channel vectors, a pooled [N, C]) are read plain: the CPU kernel maps the result's
  // blocked index to their coordinates (runtime/cpu/Fused.cpp).
  void assignElementwise(Operation* op) {
    Type space = op->getResultTypes().front();
    // bf16 too for a rounding, and a fused body (which may read and write bf16 values)
    std::string layout = blockedFor(space, ir::isBf16Rounding(op) || llvm::isa<ir::FusedOp>(op));
    bool anyBlocked = llvm::any_of(op->getOperandTypes(), [](Type t) { return !ir::layoutOf(t).empty(); });
    if (layout.empty() || !anyBlocked) {
      requirePlain(op);
      return;
    }
    auto full = [&](Type t) { return ir::withLayout(t, "").getShape() == ir::withLayout(space, "").getShape(); };
    for (OpOperand& operand : op->getOpOperands()) {
      const std::string has = ir::layoutOf(operand.get().getType()).str();
      const std::string wanted = full(operand.get().getType()) ? layout : "";
      if (has != wanted) operand.set(relaid(operand.get(), wanted, op));
    }
    auto retype = [&](Value v) {
      if (full(v.getType())) v.setType(ir::withLayout(v.getType(), layout));
    };
    for (Value result : op->getResults()) retype(result);
    if (auto fused = llvm::dyn_cast<ir::FusedOp>(op)) {
      Block& body = fused.getBody().front();
      for (BlockArgument arg : body.getArguments()) retype(arg);
      for (Operation& inner : body.without_terminator())
        for (Value result : inner.getResults()) retype(result);
    }
  }

  void requirePlain(Operation* op) {
    for (OpOperand& operand : op->getOpOperands())
      if (!ir::layoutOf(operand.get().getType()).empty()) operand.set(relaid(operand.get(), "", op));
  }

  // `value` in `layout`: one relayout per value and layout, placed before its first user (later
  // users come after it in the block), so the copy lives no longer than it must.
  Value relaid(Value value, const std::string& layout, Operation* user) {
    auto key = std::make_pair(value.getAsOpaquePointer(), layout);
    if (auto found = relaid_.find(key); found != relaid_.end()) return found->second;
    OpBuilder builder(user);
    Value converted =
        builder.create<ir::RelayoutOp>(value.getLoc(), ir::withLayout(value.getType(), layout), value);
    relaid_[key] = converted;
    return converted;
  }

  Block& block_;
  runtime::BlockedLayouts layouts_;
  std::map<std::pair<void*, std::string>, Value> relaid_;
};

struct AssignLayoutsPass : impl::AssignLayoutsBase<AssignLayoutsPass> {
  using AssignLayoutsBase::AssignLayoutsBase;
  void runOnOperation() override {
    try {
      runtime::BlockedLayouts check(layout);
    } catch (const std::exception& e) {
      getOperation()->emitError() << "spmd-assign-layouts: " << e.what();
      return signalPassFailure();
    }
    if (layout.empty()) return;
    getOperation()->walk([&](FunctionOpInterface function) {
      if (!function.isExternal()) Assigner(function.getFunctionBody().front(), layout).run();
    });
  }
};

}  // namespace
}  // namespace spmd::passes
