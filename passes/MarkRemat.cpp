// spmd-mark-remat: the compiler's choice of what to recompute (PmapOptions::memoryBudget; the
// pipeline searches the fewest segments that fit the budget, compiler/Pipeline.cpp). Marks the
// `segments` candidate segments (passes/RematCandidates.h) that free the most bytes as
// checkpoint segments (spmd.remat, as spmd::checkpoint does; -1: all of them), and records the
// choice on the function (spmd.remat_chosen: the layers, largest first) for the dump.
#include "llvm/ADT/STLExtras.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "ir/Locations.h"
#include "passes/Passes.h"
#include "passes/RematCandidates.h"

namespace spmd::passes {

#define GEN_PASS_DEF_MARKREMAT
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

int64_t staticBytesOf(Value v) {
  auto type = llvm::dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape()) return 0;
  return type.getNumElements() * int64_t((type.getElementTypeBitWidth() + 7) / 8);
}

// "stage2.0.conv1" at depth 2 -> "stage2.0"; a shorter path is itself.
std::string prefix(const std::string& path, int depth) {
  size_t end = 0;
  for (int d = 0; d < depth; ++d) {
    end = path.find('.', d == 0 ? 0 : end + 1);
    if (end == std::string::npos) return path;
  }
  return path.substr(0, end);
}

}  // namespace

std::vector<RematCandidate> rematCandidates(Operation* root, int depth) {
  std::vector<RematCandidate> out;
  root->walk([&](ir::ValueAndGradOp grad) {
    // Runs of ops sharing the path's first `depth` components; a run is shallow when every op
    // in it is a layer of its own at that depth (stem.conv, not stage1.0.conv1 in stage1.0).
    std::vector<RematCandidate> runs;
    std::vector<bool> shallow;
    for (Operation& op : grad.getBody().front().without_terminator()) {
      const std::string path = op.hasAttr(ir::kRematAttr) ? "" : layerPath(op.getLoc());
      const std::string layer = prefix(path, depth);
      if (runs.empty() || runs.back().layer != layer) runs.push_back({layer, {}, 0}), shallow.push_back(true);
      if (!layer.empty()) runs.back().ops.push_back(&op);
      if (path != layer) shallow.back() = false;
    }
    // Shallow runs in a row under one parent (a Sequential of leaf layers: stem.conv, stem.bn,
    // stem.relu) make one candidate, the parent.
    std::vector<RematCandidate> merged;
    bool lastShallow = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      RematCandidate& run = runs[i];
      if (!merged.empty() && lastShallow && shallow[i] && !run.layer.empty() &&
          prefix(merged.back().layer, 1) == prefix(run.layer, 1)) {
        merged.back().layer = prefix(run.layer, 1);
        merged.back().ops.insert(merged.back().ops.end(), run.ops.begin(), run.ops.end());
        continue;
      }
      lastShallow = shallow[i];
      merged.push_back(std::move(run));
    }
    for (RematCandidate& c : merged) {
      if (c.layer.empty() || c.ops.size() < 2) continue;
      for (size_t i = 0; i + 1 < c.ops.size(); ++i)
        for (Value result : c.ops[i]->getResults()) c.bytes += staticBytesOf(result);
      out.push_back(std::move(c));
    }
  });
  return out;
}

namespace {

struct MarkRematPass : impl::MarkRematBase<MarkRematPass> {
  using MarkRematBase::MarkRematBase;
  void runOnOperation() override {
    std::vector<RematCandidate> candidates = rematCandidates(getOperation(), depth);
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const RematCandidate& a, const RematCandidate& b) { return a.bytes > b.bytes; });
    int64_t next = 0;  // after the user's own segment numbers
    getOperation()->walk([&](Operation* op) {
      if (auto mark = op->getAttrOfType<IntegerAttr>(ir::kRematAttr)) next = std::max(next, mark.getInt() + 1);
    });
    const size_t count = segments < 0 ? candidates.size() : std::min(candidates.size(), size_t(segments));
    Builder b(&getContext());
    SmallVector<Attribute> chosen;
    for (size_t i = 0; i < count; ++i) {
      for (Operation* op : candidates[i].ops) op->setAttr(ir::kRematAttr, b.getI64IntegerAttr(next));
      ++next;
      chosen.push_back(b.getStringAttr(candidates[i].layer));
    }
    getOperation()->walk([&](func::FuncOp function) {
      if (!function.getBody().empty()) function->setAttr("spmd.remat_chosen", b.getArrayAttr(chosen));
    });
  }
};

}  // namespace
}  // namespace spmd::passes
