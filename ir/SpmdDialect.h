// The `spmd` MLIR dialect: generated op classes plus the registration entry point.
// Only compiler/, passes/, tools/ and the frontend's .cpp files include this (it pulls in MLIR).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "ir/Layout.h"
#include "ir/SpmdAttributes.h"
#include "ir/SpmdDialect.h.inc"
#include "ir/SpmdEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "ir/SpmdAttrs.h.inc"

namespace spmd::ir {
// Marks from SpmdInterfaces.td: the op's gradient is zero almost everywhere (argmax), or the op
// is a backward op with no VJP of its own (second derivatives are not supported).
template <typename ConcreteType>
class ZeroGradient : public mlir::OpTrait::TraitBase<ConcreteType, ZeroGradient> {};
template <typename ConcreteType>
class FirstOrderOnly : public mlir::OpTrait::TraitBase<ConcreteType, FirstOrderOnly> {};
}  // namespace spmd::ir

#include "ir/SpmdInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ir/SpmdOps.h.inc"

namespace spmd::ir {
// Names of every op in the dialect without the "spmd." prefix, in definition order.
std::vector<std::string> opNames();

// How autodiff treats an op: through its VJP rule, as having a zero gradient, or not at all
// (a backward op: second derivatives are unsupported). `None` means the op lacks all three.
enum class Differentiation { Vjp, ZeroGradient, FirstOrderOnly, None };
Differentiation differentiation(mlir::Operation* op);
Differentiation differentiation(const std::string& opName);  // "conv2d"

// Ops a spmd.fused body may hold: the elementwise ops on one shape (the rows of
// runtime/base/ElementwiseTable.h), converts between f32 and bf16, splat constants, broadcast_in_dim.
bool isElementwise(mlir::Operation* op);
// A convert between f32 and bf16: spmd-widen-bf16's widenings and roundings, which read and write
// each element at one index as an elementwise op does.
bool isBf16Rounding(mlir::Operation* op);
bool isFusable(mlir::Operation* op);  // isElementwise, isBf16Rounding, a splat constant, or broadcast_in_dim
}  // namespace spmd::ir
