// The collective ops (all_reduce, all_gather, reduce_scatter, ppermute, all_to_all, axis_index): shape rules, the
// axis-binding verifier, and VJP rules. Collectives run over the axis a spmd::pmap binds; the
// enclosing function records it as the attributes spmd.axis_name and spmd.axis_size.
#include <optional>
#include <vector>
#include "ir/ShapeChecks.h"
#include "ir/SpmdDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;

namespace spmd::ir {
using namespace checks;
namespace {

// The axis bound by the function around `op`: its name and size, or an error naming the
// axis the op asked for and the one that is bound.
LogicalResult checkAxisBound(Operation* op, StringRef axis) {
  auto function = op->getParentOfType<FunctionOpInterface>();
  auto bound = function ? function->getAttrOfType<StringAttr>(kAxisNameAttr) : StringAttr();
  if (!bound)
    return op->emitOpError() << "runs over axis '" << axis
                             << "', but no axis is bound here: collectives only work inside a "
                                "function mapped by spmd::pmap (func attribute spmd.axis_name)";
  if (bound.getValue() != axis)
    return op->emitOpError() << "runs over axis '" << axis << "', but the enclosing spmd::pmap "
                             << "binds axis '" << bound.getValue()
                             << "'; use that name (or nest a pmap over '" << axis << "')";
  if (!function->getAttrOfType<IntegerAttr>(kAxisSizeAttr))
    return op->emitOpError() << "the function binding axis '" << axis
                             << "' has no integer spmd.axis_size attribute";
  return success();
}

int64_t boundAxisSize(Operation* op) {
  return op->getParentOfType<FunctionOpInterface>()
      ->getAttrOfType<IntegerAttr>(kAxisSizeAttr)
      .getInt();
}

// The devices the axis' replicas run on: its size, or with gradient accumulation
// (spmd.micro_batches) its size over the micro-batches each device runs in turn.
int64_t boundDevices(Operation* op) {
  auto function = op->getParentOfType<FunctionOpInterface>();
  auto micro = function->getAttrOfType<IntegerAttr>(kMicroBatchesAttr);
  const int64_t size = boundAxisSize(op);
  return micro && micro.getInt() > 1 && size % micro.getInt() == 0 ? size / micro.getInt() : size;
}

// all_gather and reduce_scatter span the axis' replicas, or with accumulation its devices (the
// parameters' slices of spmd-shard-update are cut over the devices, and their gathers and
// reduce-scatters span those).
bool spansAxis(Operation* op, int64_t size) { return size == boundAxisSize(op) || size == boundDevices(op); }
// ", or 2 (its devices: ...)" where accumulation makes the devices fewer than the replicas.
std::string orDevices(Operation* op) {
  if (boundDevices(op) == boundAxisSize(op)) return "";
  return " or " + std::to_string(boundDevices(op)) + " (its devices, over which accumulation's sliced parameters are cut)";
}

RankedTensorType rankedTypeOf(Value v) { return llvm::cast<RankedTensorType>(v.getType()); }

// Replica groups (all_reduce's, all_gather's, reduce_scatter's, all_to_all's): both attributes or neither;
// every replica of the axis once, in groups of group_size.
LogicalResult verifyGroups(Operation* op, std::optional<ArrayRef<int64_t>> groups, std::optional<uint64_t> groupSize) {
  if (groups.has_value() != groupSize.has_value())
    return op->emitOpError() << "replica_groups and group_size come together (one is missing)";
  if (!groups) return success();
  const int64_t size = boundAxisSize(op), g = int64_t(*groupSize);
  if (g < 1 || size % g != 0 || int64_t(groups->size()) != size)
    return op->emitOpError() << "replica_groups must hold each of the axis' " << size << " replicas once, in groups of "
                             << "group_size " << g << " (a divisor of " << size << "), but has " << groups->size()
                             << " entries";
  std::vector<bool> seen(size_t(size), false);
  for (int64_t r : *groups) {
    if (r < 0 || r >= size || seen[size_t(r)])
      return op->emitOpError() << "replica_groups names replica " << r << (r >= 0 && r < size ? " twice" : "")
                               << "; each of the axis' replicas 0.." << size - 1 << " belongs to exactly one group";
    seen[size_t(r)] = true;
  }
  return success();
}

}  // namespace

//===--- shape rules -------------------------------------------------------------------------===//

LogicalResult AllReduceOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& results) {
  if (adaptor.getInputs().empty()) return fail(loc, "all_reduce", "needs at least one operand");
  Type element = ranked(adaptor.getInputs()[0]).getElementType();
  for (Value input : adaptor.getInputs()) {
    auto type = expectTensor(loc, "all_reduce", "every operand", input, -1, element);
    if (failed(type)) return failure();
    results.push_back(*type);
  }
  return success();
}

LogicalResult AllGatherOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                            SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "all_gather", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  if (adaptor.getAxisSize() < 1)
    return fail(loc, "all_gather", "axis_size must be positive, got " +
                                       std::to_string(adaptor.getAxisSize()));
  SmallVector<int64_t> shape{static_cast<int64_t>(adaptor.getAxisSize())};
  shape.append(in->getShape().begin(), in->getShape().end());
  results.push_back(RankedTensorType::get(shape, in->getElementType()));
  return success();
}

LogicalResult ReduceScatterOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                                SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "reduce_scatter", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  if (in->getRank() < 1)
    return fail(loc, "reduce_scatter", "input needs a leading axis of the axis size, got " + str(*in));
  results.push_back(RankedTensorType::get(in->getShape().drop_front(), in->getElementType()));
  return success();
}

LogicalResult PpermuteOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "ppermute", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  results.push_back(*in);
  return success();
}

LogicalResult AllToAllOp::inferReturnTypes(MLIRContext*, OptLoc loc, Adaptor adaptor,
                                           SmallVectorImpl<Type>& results) {
  auto in = expectTensor(loc, "all_to_all", "input", adaptor.getInput(), -1);
  if (failed(in)) return failure();
  const int64_t rank = in->getRank(), n = int64_t(adaptor.getAxisSize());
  const int64_t split = int64_t(adaptor.getSplitAxis()), concat = int64_t(adaptor.getConcatAxis());
  if (n < 1) return fail(loc, "all_to_all", "axis_size must be positive, got " + std::to_string(n));
  if (split < 0 || split >= rank || concat < 0 || concat >= rank)
    return fail(loc, "all_to_all", "split_axis " + std::to_string(split) + " and concat_axis " + std::to_string(concat) +
                                       " must be axes of the input " + str(*in));
  if (in->getDimSize(split) % n)
    return fail(loc, "all_to_all", "the input " + str(*in) + " has " + std::to_string(in->getDimSize(split)) +
                                       " along split_axis " + std::to_string(split) + ", which does not split into " +
                                       std::to_string(n) + " equal chunks (one per replica)");
  SmallVector<int64_t> shape(in->getShape());
  shape[split] /= n;
  shape[concat] *= n;
  results.push_back(RankedTensorType::get(shape, in->getElementType()));
  return success();
}

LogicalResult AxisIndexOp::inferReturnTypes(MLIRContext* context, OptLoc, Adaptor,
                                            SmallVectorImpl<Type>& results) {
  results.push_back(RankedTensorType::get({}, IntegerType::get(context, 32)));
  return success();
}

//===--- verifiers: the axis must be bound ---------------------------------------------------===//

namespace {
// The mean of integers is not an integer: refused rather than truncated.
LogicalResult checkIntegerMean(Operation* op, Reduction reduction, Value input) {
  if (reduction != Reduction::Mean || llvm::isa<FloatType>(rankedTypeOf(input).getElementType())) return success();
  return op->emitOpError() << "takes the mean of the integer tensor " << rankedTypeOf(input)
                           << ", which is not an integer; reduce with sum and divide in a float type "
                           << "(spmd::pmean of an i32 tensor does: it returns the f32 mean)";
}
}  // namespace

LogicalResult AllReduceOp::verify() {
  if (failed(checkAxisBound(*this, getAxisName()))) return failure();
  for (Value input : getInputs())
    if (failed(checkIntegerMean(*this, getReduction(), input))) return failure();
  return verifyGroups(*this, getReplicaGroups(), getGroupSize());
}
LogicalResult AxisIndexOp::verify() { return checkAxisBound(*this, getAxisName()); }

LogicalResult AllGatherOp::verify() {
  if (failed(checkAxisBound(*this, getAxisName()))) return failure();
  if (failed(verifyGroups(*this, getReplicaGroups(), getGroupSize()))) return failure();
  if (getGroupSize()) {
    if (getAxisSize() != *getGroupSize())
      return emitOpError() << "axis_size " << getAxisSize() << " differs from group_size " << *getGroupSize()
                           << ": within groups a replica stacks its group's operands";
    return success();
  }
  if (!spansAxis(*this, static_cast<int64_t>(getAxisSize())))
    return emitOpError() << "axis_size " << getAxisSize() << " differs from the size " << boundAxisSize(*this)
                         << " of axis '" << getAxisName() << "'" << orDevices(*this);
  return success();
}

LogicalResult AllToAllOp::verify() {
  if (failed(checkAxisBound(*this, getAxisName()))) return failure();
  if (failed(verifyGroups(*this, getReplicaGroups(), getGroupSize()))) return failure();
  if (getGroupSize()) {
    if (getAxisSize() != *getGroupSize())
      return emitOpError() << "axis_size " << getAxisSize() << " differs from group_size " << *getGroupSize()
                           << ": within groups a replica exchanges chunks with its group's members";
    return success();
  }
  if (static_cast<int64_t>(getAxisSize()) != boundAxisSize(*this))
    return emitOpError() << "axis_size " << getAxisSize() << " differs from the size " << boundAxisSize(*this)
                         << " of axis '" << getAxisName() << "'";
  return success();
}

LogicalResult PpermuteOp::verify() {
  if (failed(checkAxisBound(*this, getAxisName()))) return failure();
  ArrayRef<int64_t> pairs = getPairs();
  if (pairs.size() % 2)
    return emitOpError() << "pairs must be (source, destination) pairs, flattened, but has " << pairs.size()
                         << " entries";
  const int64_t size = boundAxisSize(*this);
  llvm::SmallDenseSet<int64_t> sources, destinations;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    for (int64_t replica : {pairs[i], pairs[i + 1]})
      if (replica < 0 || replica >= size)
        return emitOpError() << "pair (" << pairs[i] << ", " << pairs[i + 1] << ") names replica " << replica
                             << ", but axis '" << getAxisName() << "' has replicas 0.." << size - 1;
    if (!sources.insert(pairs[i]).second)
      return emitOpError() << "replica " << pairs[i] << " is the source of two pairs; each replica sends once";
    if (!destinations.insert(pairs[i + 1]).second)
      return emitOpError() << "replica " << pairs[i + 1]
                           << " is the destination of two pairs; each replica receives at most once";
  }
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  if (failed(checkAxisBound(*this, getAxisName()))) return failure();
  if (getReduction() != Reduction::Sum && getReduction() != Reduction::Mean)
    return emitOpError() << "reduction " << stringifyReduction(getReduction()) << " is not one a reduce_scatter "
                         << "takes (sum or mean)";
  if (failed(checkIntegerMean(*this, getReduction(), getInput()))) return failure();
  if (failed(verifyGroups(*this, getReplicaGroups(), getGroupSize()))) return failure();
  if (getGroupSize()) {
    if (getReduction() != Reduction::Sum)
      return emitOpError() << "within replica groups a reduce_scatter sums (reduction sum)";
    if (rankedTypeOf(getInput()).getDimSize(0) != int64_t(*getGroupSize()))
      return emitOpError() << "input " << rankedTypeOf(getInput()) << " must have a leading axis of group_size "
                           << *getGroupSize() << " (one row per member of a group)";
    return success();
  }
  if (!spansAxis(*this, rankedTypeOf(getInput()).getDimSize(0)))
    return emitOpError() << "input " << rankedTypeOf(getInput()) << " must have a leading axis of size "
                         << boundAxisSize(*this) << " (the size of axis '" << getAxisName() << "')" << orDevices(*this);
  return success();
}

//===--- VJP rules ---------------------------------------------------------------------------===//
// pmap semantics: each replica seeds the cotangent of its own loss, so a cotangent may differ
// between replicas, and the derivative of the sum over replicas of their losses flows back
// through the collective's transpose (psum -> psum, pmean -> pmean, all_gather ->
// reduce_scatter). spmd-insert-pmean then averages gradients of replicated parameters.

LogicalResult AllReduceOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                    SmallVectorImpl<Value>& out) {
  Location loc = getLoc();
  Reduction reduction = getReduction();
  for (auto [input, result, grad] : llvm::zip(getInputs(), getResults(), grads)) {
    if (!grad || !llvm::isa<FloatType>(rankedTypeOf(input).getElementType())) {
      out.push_back(Value());
      continue;
    }
    // The transposes reduce within the same groups.
    if (reduction == Reduction::Sum || reduction == Reduction::Mean) {
      out.push_back(b.create<AllReduceOp>(loc, ValueRange{grad}, getAxisName(), reduction, getReplicaGroupsAttr(),
                                          getGroupSizeAttr())
                        .getResult(0));
      continue;
    }
    // max/min: the summed cotangent goes to the replicas holding the extreme value, shared
    // equally between ties (as reduce_max does within a replica).
    Value selected = reduction == Reduction::Max ? b.create<GreaterEqualOp>(loc, input, result).getResult()
                                        : b.create<GreaterEqualOp>(loc, result, input).getResult();
    auto sums = b.create<AllReduceOp>(loc, ValueRange{grad, selected}, getAxisName(), Reduction::Sum,
                                      getReplicaGroupsAttr(), getGroupSizeAttr());
    Value share = b.create<DivOp>(loc, sums.getResult(0), sums.getResult(1));
    out.push_back(b.create<MulOp>(loc, share, selected));
  }
  return success();
}

LogicalResult AllGatherOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                    SmallVectorImpl<Value>& out) {
  if (!llvm::isa<FloatType>(rankedTypeOf(getInput()).getElementType())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(b.create<ReduceScatterOp>(getLoc(), grads[0], getAxisName(), Reduction::Sum, getReplicaGroupsAttr(),
                                          getGroupSizeAttr()));
  return success();
}

LogicalResult PpermuteOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  if (!llvm::isa<FloatType>(rankedTypeOf(getInput()).getElementType())) {
    out.push_back(Value());
    return success();
  }
  SmallVector<int64_t> inverse;  // (destination, source): the cotangent goes back where it came from
  for (size_t i = 0; i < getPairs().size(); i += 2) inverse.append({getPairs()[i + 1], getPairs()[i]});
  out.push_back(b.create<PpermuteOp>(getLoc(), grads[0], getAxisName(), inverse));
  return success();
}

LogicalResult AllToAllOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads, SmallVectorImpl<Value>& out) {
  if (!llvm::isa<FloatType>(rankedTypeOf(getInput()).getElementType())) {
    out.push_back(Value());
    return success();
  }
  out.push_back(b.create<AllToAllOp>(getLoc(), grads[0], getAxisName(), getAxisSize(), getConcatAxis(), getSplitAxis(),
                                     getReplicaGroupsAttr(), getGroupSizeAttr()));
  return success();
}

LogicalResult ReduceScatterOp::buildVjp(OpBuilder& b, ArrayRef<Value> grads,
                                        SmallVectorImpl<Value>& out) {
  const int64_t replicas = rankedTypeOf(getInput()).getDimSize(0);
  Value gathered = b.create<AllGatherOp>(getLoc(), grads[0], getAxisName(), replicas, getReplicaGroupsAttr(),
                                         getGroupSizeAttr());
  if (getReduction() == Reduction::Mean) {  // each replica's row took 1/N of every input's
    auto type = llvm::cast<RankedTensorType>(gathered.getType());
    auto n = DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), double(replicas)));
    gathered = b.create<DivOp>(getLoc(), gathered, b.create<ConstantOp>(getLoc(), n));
  }
  out.push_back(gathered);
  return success();
}

}  // namespace spmd::ir
