// Lowering of a verified `spmd` function to the runtime's backend-neutral Program: one buffer
// per value (constants carry their data), one Step per op, attributes converted to plain values.
#pragma once

#include "runtime/program/Program.h"

namespace mlir::func {
class FuncOp;
}

namespace spmd {
runtime::Program lowerToProgram(mlir::func::FuncOp function);
}
