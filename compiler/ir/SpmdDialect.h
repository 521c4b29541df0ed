// The `spmd` MLIR dialect: generated op classes plus the registration entry point.
// Only compiler/, passes/, tools/ and the frontend's .cpp files include this (it pulls in MLIR).
#pragma once

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "compiler/ir/SpmdDialect.h.inc"

#define GET_OP_CLASSES
#include "compiler/ir/SpmdOps.h.inc"

namespace spmd::ir {
// Names of every op in the dialect without the "spmd." prefix, in definition order.
std::vector<std::string> opNames();
}  // namespace spmd::ir
