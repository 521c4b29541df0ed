// Per-axis replication on a named mesh (jax's varying manual axes): inside a function
// spmd::shardMap maps over a mesh, each value varies over a set of the mesh's axes (its bits may
// differ between two replicas that differ in that coordinate only) and is invariant over the
// others. The rules, one forward walk:
//   - an argument varies over the axes its spec splits it over (spmd.mesh_varies), a mapped one
//     without that mark over every axis, a replicated one over none;
//   - a collective over a mesh axis is composed of several ops, the last of which the frontend
//     marks with the axes its result varies over (psum/pmean/pmax/pmin/allGather/pbroadcast over
//     A: the operand's axes less A; psumScatter/ppermute over A: plus A; axisIndex(A): A);
//   - collectives over the whole mapped axis: all_reduce and all_gather results vary over none,
//     axis_index, reduce_scatter, ppermute and all_to_all over all; within replica groups (a
//     transpose the frontend did not mark) all_reduce and all_gather vary where their operands
//     do, reduce_scatter and all_to_all also over the axes the groups span;
//   - any other op varies over the union of its operands' axes;
//   - a value_and_grad's yields follow its body; the gradient of a primal varies over the
//     primal's axes and those of every value the ops depending on it read or make (the only
//     values its derivative is built from), so a whole parameter used only by invariant
//     computation gets an invariant gradient.
// Axes of size 1 never vary. The frontend asks it while tracing (to mark collectives and check
// shardMap's out specs); spmd-replication writes it into dumps (spmd.varies_over).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "llvm/ADT/DenseMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

namespace spmd::passes {

class MeshVariation {
 public:
  // A function without spmd.mesh_axes has no mesh: every mask is 0.
  explicit MeshVariation(mlir::FunctionOpInterface function);
  bool onMesh() const { return !axes_.empty(); }
  // Bit i: the value varies over mesh axis i.
  uint64_t of(mlir::Value value) const { return masks_.lookup(value); }
  // The mask of these axis names (axes of size 1 and names the mesh lacks left out).
  uint64_t maskOf(mlir::ArrayAttr names) const;
  uint64_t maskOf(const std::vector<std::string>& names) const;
  std::vector<std::string> namesOf(uint64_t mask) const;
  mlir::ArrayAttr attrOf(mlir::MLIRContext* context, uint64_t mask) const;
  // Marks every op of the function whose results vary with spmd.varies_over (the frontend's
  // marked collectives keep their spmd.mesh_varies), and clears stale marks.
  void annotate(mlir::FunctionOpInterface function) const;

 private:
  void visitBlock(mlir::Block& block);
  void visit(mlir::Operation* op);
  uint64_t unionOf(mlir::ValueRange values) const;
  // The axes along which some two members of a group (replica_groups, flattened) differ.
  uint64_t spanOf(llvm::ArrayRef<int64_t> groups, uint64_t groupSize) const;
  std::vector<std::string> axes_;
  std::vector<int64_t> sizes_;
  uint64_t all_ = 0;  // every axis of size > 1
  llvm::DenseMap<mlir::Value, uint64_t> masks_;
};

}  // namespace spmd::passes
