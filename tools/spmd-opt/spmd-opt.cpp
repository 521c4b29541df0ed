// spmd-opt: mlir-opt with the `spmd` dialect and the pipeline's passes registered, so any IR
// dump re-parses and any pass replays by itself (e.g. `spmd-opt dump.mlir --canonicalize`), and
// MLIR's --view-op-graph, which writes a dump as a Graphviz graph (`2> graph.dot; dot -Tsvg`).
// Its flags are MLIR's (llvm::cl, which its registry of passes and options needs), not CLI11;
// --version names spmd's version beside LLVM's.
// Input nested deeper than kMaxNesting levels, and boolean arrays with integer elements (which
// crash MLIR 19's printer), are refused with file:line:column before parsing.
#include "compiler/Registration.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "tools/cli/Cli.h"
#include "tools/spmd-opt/BoolArrayCheck.h"
#include "tools/spmd-opt/NestingCheck.h"

namespace {
constexpr size_t kMaxNesting = 512;
}

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  spmd::registerDialects(registry);
  spmd::registerPasses();
  mlir::registerViewOpGraph();
  llvm::cl::AddExtraVersionPrinter(
      [](llvm::raw_ostream& os) { os << "spmd-opt (spmd " << spmd::cli::version() << ")\n"; });
  auto [input, output] =
      mlir::registerAndParseCLIOptions(argc, argv, "spmd optimizer driver\n", registry);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file = mlir::openInputFile(input, &error);
  if (!file) {
    llvm::errs() << "spmd-opt: error: " << error << "\n";
    return 1;
  }
  auto problem = spmd::checkNesting(file->getBuffer(), kMaxNesting);
  if (!problem) problem = spmd::checkBoolArrays(file->getBuffer());
  if (problem) {
    llvm::errs() << (input == "-" ? "<stdin>" : input) << ":" << problem->line << ":"
                 << problem->column << ": error: " << problem->message << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> out = mlir::openOutputFile(output, &error);
  if (!out) {
    llvm::errs() << "spmd-opt: error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::MlirOptMain(out->os(), std::move(file), registry,
                                     mlir::MlirOptMainConfig::createFromCLOptions())))
    return 1;
  out->keep();
  return 0;
}
