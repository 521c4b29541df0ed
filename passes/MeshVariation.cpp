// MeshVariation: one forward walk over a mesh function (passes/MeshVariation.h).
#include "passes/MeshVariation.h"

#include "ir/SpmdAttributes.h"
#include "ir/SpmdDialect.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/IR/Builders.h"

namespace spmd::passes {

using namespace mlir;

MeshVariation::MeshVariation(FunctionOpInterface function) {
  auto names = function->getAttrOfType<ArrayAttr>(ir::kMeshAxesAttr);
  auto shape = function->getAttrOfType<DenseI64ArrayAttr>(ir::kMeshShapeAttr);
  if (!names || !shape || int64_t(names.size()) != shape.size() || names.size() > 64 || function.isExternal()) return;
  for (auto [name, size] : llvm::zip(names, shape.asArrayRef())) {
    if (auto text = llvm::dyn_cast<StringAttr>(name)) axes_.push_back(text.str());
    else axes_.push_back("");
    sizes_.push_back(size);
    if (size > 1) all_ |= uint64_t(1) << (axes_.size() - 1);
  }
  Block& entry = function.getFunctionBody().front();
  for (unsigned i = 0; i < entry.getNumArguments(); ++i) {
    uint64_t mask = 0;
    if (auto marked = function.getArgAttrOfType<ArrayAttr>(i, ir::kMeshVariesAttr)) mask = maskOf(marked);
    else if (function.getArgAttr(i, ir::kMappedAttr)) mask = all_;
    masks_[entry.getArgument(i)] = mask;
  }
  visitBlock(entry);
}

uint64_t MeshVariation::maskOf(ArrayAttr names) const {
  std::vector<std::string> list;
  for (Attribute name : names)
    if (auto text = llvm::dyn_cast<StringAttr>(name)) list.push_back(text.str());
  return maskOf(list);
}

uint64_t MeshVariation::maskOf(const std::vector<std::string>& names) const {
  uint64_t mask = 0;
  for (const std::string& name : names)
    for (size_t i = 0; i < axes_.size(); ++i)
      if (axes_[i] == name && sizes_[i] > 1) mask |= uint64_t(1) << i;
  return mask;
}

std::vector<std::string> MeshVariation::namesOf(uint64_t mask) const {
  std::vector<std::string> names;
  for (size_t i = 0; i < axes_.size(); ++i)
    if (mask >> i & 1) names.push_back(axes_[i]);
  return names;
}

ArrayAttr MeshVariation::attrOf(MLIRContext* context, uint64_t mask) const {
  Builder b(context);
  SmallVector<Attribute> names;
  for (const std::string& name : namesOf(mask)) names.push_back(b.getStringAttr(name));
  return b.getArrayAttr(names);
}

uint64_t MeshVariation::spanOf(ArrayRef<int64_t> groups, uint64_t groupSize) const {
  // Replica r's coordinate along axis i of the row-major mesh: (r / stride_i) mod size_i.
  std::vector<int64_t> strides(sizes_.size(), 1);
  for (size_t i = sizes_.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes_[i];
  uint64_t mask = 0;
  for (size_t first = 0; groupSize > 0 && first + groupSize <= groups.size(); first += groupSize)
    for (size_t k = first + 1; k < first + groupSize; ++k)
      for (size_t i = 0; i < sizes_.size(); ++i)
        if (sizes_[i] > 1 && groups[k] / strides[i] % sizes_[i] != groups[first] / strides[i] % sizes_[i])
          mask |= uint64_t(1) << i;
  return mask & all_;
}

uint64_t MeshVariation::unionOf(ValueRange values) const {
  uint64_t mask = 0;
  for (Value v : values) mask |= masks_.lookup(v);
  return mask;
}

void MeshVariation::visitBlock(Block& block) {
  for (Operation& op : block) visit(&op);
}

void MeshVariation::visit(Operation* op) {
  auto setAll = [&](uint64_t mask) {
    for (Value result : op->getResults()) masks_[result] = mask;
  };
  if (auto marked = op->getAttrOfType<ArrayAttr>(ir::kMeshVariesAttr)) return setAll(maskOf(marked));
  // Within groups (a mesh axis' psum, marked above where the frontend made it; unmarked, a
  // transpose made by differentiation): no more varying than its operands.
  if (auto reduce = llvm::dyn_cast<ir::AllReduceOp>(op); reduce && reduce.getReplicaGroups())
    return setAll(unionOf(reduce.getInputs()));
  if (auto gather = llvm::dyn_cast<ir::AllGatherOp>(op); gather && gather.getReplicaGroups())
    return setAll(unionOf(gather->getOperands()));
  // A reduce_scatter or all_to_all within groups (unmarked: a transpose) hands each member its own
  // part: it varies where its operand does and over the axes its groups span.
  if (auto scatter = llvm::dyn_cast<ir::ReduceScatterOp>(op); scatter && scatter.getReplicaGroups())
    return setAll(unionOf(scatter->getOperands()) | spanOf(*scatter.getReplicaGroups(), *scatter.getGroupSize()));
  if (auto exchange = llvm::dyn_cast<ir::AllToAllOp>(op); exchange && exchange.getReplicaGroups())
    return setAll(unionOf(exchange->getOperands()) | spanOf(*exchange.getReplicaGroups(), *exchange.getGroupSize()));
  if (llvm::isa<ir::AllReduceOp, ir::AllGatherOp>(op)) return setAll(0);
  if (llvm::isa<ir::ReduceScatterOp, ir::PpermuteOp, ir::AllToAllOp, ir::AxisIndexOp>(op)) return setAll(all_);
  if (auto vg = llvm::dyn_cast<ir::ValueAndGradOp>(op)) {
    Block& body = vg.getBody().front();
    for (auto [arg, primal] : llvm::zip(body.getArguments(), vg.getPrimals())) masks_[arg] = masks_.lookup(primal);
    visitBlock(body);
    Operation* yield = body.empty() ? nullptr : &body.back();
    if (!yield || !llvm::isa<ir::YieldOp>(yield)) return setAll(all_);  // still being traced
    const unsigned yields = yield->getNumOperands();
    for (unsigned i = 0; i < yields && i < vg->getNumResults(); ++i)
      masks_[vg->getResult(i)] = masks_.lookup(yield->getOperand(i));
    for (unsigned j = 0; j < vg.getPrimals().size() && yields + j < vg->getNumResults(); ++j) {
      llvm::DenseSet<Value> depends{body.getArgument(j)};
      uint64_t mask = masks_.lookup(body.getArgument(j));
      for (Operation& inner : body.without_terminator()) {
        bool reads = false;
        inner.walk([&](Operation* o) {
          for (Value v : o->getOperands()) reads |= depends.contains(v);
        });
        if (!reads) continue;
        inner.walk([&](Operation* o) {
          mask |= unionOf(o->getOperands()) | unionOf(o->getResults());
          for (Value r : o->getResults()) depends.insert(r);
        });
      }
      masks_[vg->getResult(yields + j)] = mask;
    }
    return;
  }
  if (auto custom = llvm::dyn_cast<ir::CustomVjpOp>(op)) {  // results follow forward's yields
    Block& forward = custom.getForward().front();
    for (auto [arg, input] : llvm::zip(forward.getArguments(), custom.getInputs())) masks_[arg] = masks_.lookup(input);
    visitBlock(forward);
    uint64_t any = 0;
    for (auto [i, yielded] : llvm::enumerate(forward.getTerminator()->getOperands())) {
      any |= masks_.lookup(yielded);
      if (i < op->getNumResults()) masks_[op->getResult(unsigned(i))] = masks_.lookup(yielded);
    }
    Block& backward = custom.getBackward().front();  // conservatively: what forward yields, everywhere
    for (Value arg : backward.getArguments()) masks_[arg] = any;
    return visitBlock(backward);
  }
  for (Region& region : op->getRegions())
    for (Block& block : region) {
      for (Value arg : block.getArguments()) masks_[arg] = unionOf(op->getOperands());
      visitBlock(block);
    }
  setAll(unionOf(op->getOperands()));
}

void MeshVariation::annotate(FunctionOpInterface function) const {
  function->walk([&](Operation* op) {
    if (op == function.getOperation()) return;
    op->removeAttr(ir::kVariesOverAttr);
    if (!onMesh() || op->hasAttr(ir::kMeshVariesAttr)) return;
    if (uint64_t mask = unionOf(op->getResults())) op->setAttr(ir::kVariesOverAttr, attrOf(op->getContext(), mask));
  });
}

}  // namespace spmd::passes
