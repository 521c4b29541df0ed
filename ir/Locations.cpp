// Source lines and layer paths from MLIR locations (ir/Locations.h).
#include "ir/Locations.h"

#include "mlir/IR/BuiltinAttributes.h"

namespace spmd {

std::string sourceLine(mlir::Location loc) {
  std::string found;
  loc->walk([&](mlir::Location inner) {
    if (auto file = llvm::dyn_cast<mlir::FileLineColLoc>(inner)) {
      found = file.getFilename().str() + ":" + std::to_string(file.getLine());
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  return found;
}

std::string layerPath(mlir::Location loc) {
  std::string found;
  loc->walk([&](mlir::Location inner) {
    auto name = llvm::dyn_cast<mlir::NameLoc>(inner);
    if (name && llvm::isa<mlir::FileLineColLoc>(name.getChildLoc())) {
      found = name.getName().str();
      return mlir::WalkResult::interrupt();
    }
    return mlir::WalkResult::advance();
  });
  return found;
}

}  // namespace spmd
