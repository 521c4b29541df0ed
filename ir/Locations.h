// What an op's MLIR location says about the user's code: the source line and the nn layer path
// the frontend recorded while tracing (compiler diagnostics, lowering, and passes that work per
// layer read them).
#pragma once

#include <string>

#include "mlir/IR/Location.h"

namespace spmd {

// "file.cpp:42" for the first file location inside `loc`; "" when there is none.
std::string sourceLine(mlir::Location loc);
// The nn layer path of an op ("stage2.0.conv1": the name of the NameLoc around its file
// location), or "" when it was not traced inside a layer.
std::string layerPath(mlir::Location loc);

}  // namespace spmd
