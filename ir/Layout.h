// Layouts in the IR: a tensor type's encoding holds its memory layout as a string attribute,
// `tensor<64x64x28x28xf32, "nChw8c">`; a type without one is plain row-major (runtime/device/
// Layouts.h names the layouts). Only spmd-assign-layouts, the last pass, sets encodings.
#pragma once

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeRange.h"

namespace spmd::ir {

// The layout of a ranked tensor type ("" for plain or a non-tensor).
llvm::StringRef layoutOf(mlir::Type type);
// `type` with its layout replaced ("" drops the encoding).
mlir::RankedTensorType withLayout(mlir::Type type, llvm::StringRef layout);
// Shape rules infer plain types: a result matches when it equals the inferred type up to layout.
bool sameUpToLayout(mlir::TypeRange inferred, mlir::TypeRange actual);

}  // namespace spmd::ir
