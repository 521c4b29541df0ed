// spmd-opt: mlir-opt with the `spmd` dialect and the pipeline's passes registered, so any IR
// dump re-parses and any pass replays by itself (e.g. `spmd-opt dump.mlir --canonicalize`).
#include "compiler/Registration.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  spmd::registerDialects(registry);
  spmd::registerPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "spmd optimizer driver\n", registry));
}
