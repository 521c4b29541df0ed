// spmd-widen-bf16: every op on bf16 tensors computes in f32 between bf16 roundings. Each bf16
// operand is widened once (a convert to f32 right after it is defined: exact), the op is rebuilt
// on f32, and each of its bf16 results is rounded back (a convert to bf16: to nearest even).
// Kernels thus never see bf16 (only convert does, and the fused bodies spmd-fuse-elementwise later
// makes of these converts and the ops between them), every backend runs it, and the results do not
// depend on the machine beyond f32 rounding: what torch.autocast's bf16 ops give, up to the order
// of their f32 accumulation. bf16 literals become f32 literals (exact). User converts stay.
// Two roundings that cannot change a value are left out: an op that only moves, selects or
// compares values (relu, max, a reshape...) gives a bf16 value on bf16 inputs, so its readers
// read its f32 result as it is; and a relu of a rounded result is taken before the rounding
// (relu commutes with rounding to nearest), which leaves batch_norm_train -> relu adjacent for
// spmd-fuse-relu. Roundings no reader needs any more are erased. With native-kernels, a
// convolution or matmul entirely on bf16 stays as it is (runtime/program/Bf16Kernels.h): the
// backend's bf16 kernel reads the rounded operands and rounds its result once, as here.
#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "passes/Passes.h"
#include "runtime/program/Bf16Kernels.h"

namespace spmd::passes {

#define GEN_PASS_DEF_WIDENBF16
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

bool isBf16(Type type) {
  auto tensor = llvm::dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isBF16();
}

Type widened(Type type) {
  if (!isBf16(type)) return type;
  auto tensor = llvm::cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(), Float32Type::get(type.getContext()), tensor.getEncoding());
}

bool touchesBf16(Operation* op) {
  return llvm::any_of(op->getOperandTypes(), isBf16) || llvm::any_of(op->getResultTypes(), isBf16);
}

// Whether `op` on bf16 values gives bf16 values in f32 arithmetic: it moves, selects or compares
// (the lookups and scatters by i32 indices too, max and min folds from -inf / +inf included), or
// steps to integers (floor, ceil, round, sign: a bf16 value's are bf16 values).
bool exactOnBf16(Operation* op) {
  if (auto window = llvm::dyn_cast<ir::ReduceWindowOp>(op)) return window.getReduction() == ir::Reduction::Max;
  if (auto scatter = llvm::dyn_cast<ir::ScatterReduceOp>(op)) return scatter.getReduction() != ir::Reduction::Sum;
  return llvm::isa<ir::ReluOp, ir::ReluBackwardOp, ir::NegOp, ir::AbsOp, ir::MaxOp, ir::MinOp, ir::GreaterEqualOp,
                   ir::GreaterOp, ir::LessEqualOp, ir::LessOp, ir::EqualOp, ir::NotEqualOp, ir::BroadcastInDimOp,
                   ir::ReshapeOp, ir::TransposeOp, ir::SliceOp, ir::PadOp, ir::ConcatenateOp, ir::ReduceMaxOp,
                   ir::EmbeddingOp, ir::TakeAlongAxisOp, ir::ScatterOp, ir::SegmentReduceOp, ir::FloorOp, ir::CeilOp,
                   ir::RoundOp, ir::SignOp>(op);
}

// Whether each of `op`'s float operands is bf16 (its i32 indices aside).
bool floatOperandsBf16(Operation* op) {
  return llvm::all_of(op->getOperandTypes(),
                      [](Type t) { return isBf16(t) || !llvm::isa<FloatType>(getElementTypeOrSelf(t)); });
}

// Whether `op` is left to a backend's bf16 kernel: an op with one, all its float values bf16.
bool keptInBf16(Operation* op) {
  auto floatNotBf16 = [](Type t) { return llvm::isa<FloatType>(getElementTypeOrSelf(t)) && !isBf16(t); };
  return runtime::hasBf16Kernel(op->getName().stripDialect()) &&
         !llvm::any_of(op->getOperandTypes(), floatNotBf16) && !llvm::any_of(op->getResultTypes(), floatNotBf16);
}

class Widener {
 public:
  Widener(MLIRContext* ctx, bool nativeKernels) : builder_(ctx), nativeKernels_(nativeKernels) {}

  LogicalResult run(FunctionOpInterface function) {
    SmallVector<Operation*> ops;  // the function's own ops: an op with regions on bf16 is refused whole
    for (Block& block : function.getFunctionBody())
      for (Operation& op : block) {
        if (auto convert = llvm::dyn_cast<ir::ConvertOp>(op)) {
          if (isBf16(convert.getType()) && getElementTypeOrSelf(convert.getInput().getType()).isF32())
            noteRounding(convert.getResult(), convert.getInput());  // a user's rounding is one too
        } else if (!op.hasTrait<OpTrait::IsTerminator>() && touchesBf16(&op) && !kept(&op)) {
          ops.push_back(&op);
        }
      }
    for (Operation* op : ops) {
      auto constant = llvm::dyn_cast<ir::ConstantOp>(op);
      if (failed(constant ? widenConstant(constant) : widenOp(op))) return failure();
      if (constant && constant.getResult().use_empty()) constant.erase();
    }
    for (Operation* rounding : roundings_)
      if (rounding->use_empty()) rounding->erase();
    return success();
  }

 private:
  bool kept(Operation* op) const { return nativeKernels_ && keptInBf16(op); }

  OpBuilder builder_;
  bool nativeKernels_;
  DenseMap<Value, Value> wide_;       // bf16 value -> the same values in f32
  DenseMap<Value, Value> unrounded_;  // a rounding made here -> the f32 value it rounds
  SmallVector<Operation*> roundings_;

  void noteRounding(Value rounded, Value unrounded) {
    unrounded_[rounded] = unrounded;
    roundings_.push_back(rounded.getDefiningOp());
  }

  // The value in f32: one convert per value, right where it is defined.
  Value widen(Value v) {
    if (!isBf16(v.getType())) return v;
    if (Value w = wide_.lookup(v)) return w;
    OpBuilder::InsertionGuard guard(builder_);
    if (Operation* def = v.getDefiningOp())
      builder_.setInsertionPointAfter(def);
    else
      builder_.setInsertionPointToStart(llvm::cast<BlockArgument>(v).getOwner());
    Value w = builder_.create<ir::ConvertOp>(v.getLoc(), widened(v.getType()), v);
    wide_[v] = w;
    return w;
  }

  // Readers of the literal read an f32 one; the bf16 literal stays only for readers that are not
  // widened (a return, a user's convert, an op kept in bf16).
  LogicalResult widenConstant(ir::ConstantOp op) {
    auto dense = llvm::dyn_cast<DenseFPElementsAttr>(op.getValue());
    if (!dense) return op.emitOpError("spmd-widen-bf16 needs a dense bf16 literal");
    auto type = llvm::cast<ShapedType>(widened(op.getType()));
    DenseElementsAttr values = dense.mapValues(type.getElementType(), [](const APFloat& v) {
      APFloat f = v;
      bool lost = false;
      f.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lost);  // exact: bf16 is a subset of f32
      return f.bitcastToAPInt();
    });
    builder_.setInsertionPointAfter(op);
    Value wide = builder_.create<ir::ConstantOp>(op.getLoc(), values.reshape(type));
    op.getResult().replaceUsesWithIf(wide, [&](OpOperand& use) {
      Operation* user = use.getOwner();
      return !llvm::isa<ir::ConvertOp>(user) && !user->hasTrait<OpTrait::IsTerminator>() && !kept(user);
    });
    if (wide.use_empty()) wide.getDefiningOp()->erase();  // read only by ops kept in bf16
    return success();  // (no entry in wide_: the literal may be erased, and its address reused)
  }

  LogicalResult widenOp(Operation* op) {
    if (op->getNumRegions() != 0)
      return op->emitOpError("has a region and bf16 operands or results, which spmd-widen-bf16 does not rewrite; "
                             "it runs after spmd-autodiff (which expands value_and_grad) and before fusion");
    OperationState state(op->getLoc(), op->getName());
    Value beforeRounding = llvm::isa<ir::ReluOp>(op) ? unrounded_.lookup(op->getOperand(0)) : Value();
    const bool exact = !beforeRounding && exactOnBf16(op) && floatOperandsBf16(op);
    if (beforeRounding)  // relu(round(v)) == round(relu(v)): the relu reads v
      state.addOperands(beforeRounding);
    else
      for (Value operand : op->getOperands()) state.addOperands(widen(operand));
    for (Type type : op->getResultTypes()) state.addTypes(widened(type));
    state.addAttributes(op->getAttrs());
    builder_.setInsertionPoint(op);
    Operation* wide = builder_.create(state);
    for (auto [before, after] : llvm::zip(op->getResults(), wide->getResults())) {
      if (!isBf16(before.getType())) {
        before.replaceAllUsesWith(after);
        continue;
      }
      Value rounded = builder_.create<ir::ConvertOp>(op->getLoc(), before.getType(), after);
      before.replaceAllUsesWith(rounded);  // readers widen the rounded value: the rounding is the point
      wide_.erase(before);
      noteRounding(rounded, after);
      if (exact) wide_[rounded] = after;  // already a bf16 value: readers read it as it is
    }
    op->erase();
    return success();
  }
};

struct WidenBf16Pass : impl::WidenBf16Base<WidenBf16Pass> {
  using WidenBf16Base::WidenBf16Base;
  void runOnOperation() override {
    for (auto function : getOperation().getOps<FunctionOpInterface>())
      if (failed(Widener(&getContext(), nativeKernels).run(function))) return signalPassFailure();
  }
};

}  // namespace
}  // namespace spmd::passes
