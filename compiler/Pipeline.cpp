// compile(): the pass list, per-pass verification and dumps, and lowering.
#include "compiler/Pipeline.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "compiler/Diagnostics.h"
#include "compiler/LowerToProgram.h"
#include "compiler/BatchFused.h"
#include "compiler/PlanMemory.h"
#include "runtime/program/ProgramDot.h"
#include "runtime/program/ProgramFile.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"

namespace spmd {
namespace {

class PipelineRun {
 public:
  // `source` names where the dump directory came from, for errors ("SPMD_DUMP_IR").
  PipelineRun(mlir::ModuleOp module, std::string dumpDir, std::string source)
      : module_(module), dumpDir_(std::move(dumpDir)), source_(std::move(source)) {
    if (dumpDir_.empty()) return;
    std::error_code error;
    std::filesystem::create_directories(dumpDir_, error);
    if (error || !std::filesystem::is_directory(dumpDir_))
      throw Error(source_ + ": cannot create the IR dump directory '" + dumpDir_ + "' (" +
                  (error ? error.message() : std::string("a file is in the way")) +
                  "); point it at a writable directory, or unset it");
  }

  void verify(const std::string& after) {
    DiagnosticCollector diagnostics(module_.getContext());
    if (mlir::failed(mlir::verify(module_)))
      diagnostics.fail("IR verification failed after " + after + ":\n");
    dump(after);
  }

  void run(std::unique_ptr<mlir::Pass> pass) {
    std::string name = pass->getArgument().str();
    mlir::PassManager manager(module_.getContext());
    manager.enableVerifier(false);  // verify() below reports with the pass's name
    manager.addPass(std::move(pass));
    DiagnosticCollector diagnostics(module_.getContext());
    if (mlir::failed(manager.run(module_))) diagnostics.fail("pass --" + name + " failed:\n");
    verify(name);
  }

  // The Program itself, for runtime-only runs (tools/spmd-run) on machines without MLIR.
  void saveProgram(const runtime::Program& program) {
    if (!dumpDir_.empty()) runtime::saveProgram(program, (std::filesystem::path(dumpDir_) / "program.spmd").string());
  }

  void dumpText(const std::string& file, const std::string& text) {
    if (dumpDir_.empty()) return;
    std::ofstream out(std::filesystem::path(dumpDir_) / file);
    out << text;
    if (!out.flush())
      throw Error(source_ + ": cannot write " + (std::filesystem::path(dumpDir_) / file).string() +
                  "; point it at a writable directory, or unset it");
  }

 private:
  void dump(const std::string& stage) {
    if (dumpDir_.empty()) return;
    char prefix[8];
    std::snprintf(prefix, sizeof prefix, "%02d-", index_++);
    std::string text;
    llvm::raw_string_ostream os(text);
    module_.print(os, mlir::OpPrintingFlags().enableDebugInfo(true, false));
    dumpText(prefix + stage + ".mlir", text);
  }

  mlir::ModuleOp module_;
  std::string dumpDir_, source_;
  int index_ = 0;
};

}  // namespace

std::string dumpDirectory(const CompileOptions& options) {
  std::string base = options.dumpDir;
  if (base.empty())
    if (const char* env = std::getenv("SPMD_DUMP_IR")) base = env;
  if (base.empty() || options.dumpName.empty()) return base;
  return (std::filesystem::path(base) / options.dumpName).string();
}

runtime::Program compile(mlir::ModuleOp module, const CompileOptions& options) {
  PipelineRun pipeline(module, dumpDirectory(options), options.dumpDir.empty() ? "SPMD_DUMP_IR" : "the dumpDir option");
  pipeline.verify("tracing");
  pipeline.run(passes::createInsertPmean({options.strict}));
  pipeline.run(passes::createAutodiff());
  pipeline.run(mlir::createCanonicalizerPass());
  pipeline.run(mlir::createCSEPass());
  if (options.shardUpdate) pipeline.run(passes::createShardUpdate());
  if (options.shardUpdate && options.gatherAtUse) pipeline.run(passes::createGatherAtUse());
  pipeline.run(passes::createCombineAllReduce({options.bucketBytes}));
  pipeline.run(passes::createWidenBf16({options.bf16Kernels}));
  pipeline.run(passes::createReplication());
  if (options.fuseElementwise) pipeline.run(passes::createFuseNormRelu());
  if (options.fuseElementwise) pipeline.run(passes::createFuseElementwise());
  if (options.channelBlock) pipeline.run(passes::createAssignLayouts({options.channelBlock}));

  auto function = module.lookupSymbol<mlir::func::FuncOp>(options.entry);
  if (!function) throw Error("compile: the module has no function @" + options.entry);
  runtime::Program program = lowerToProgram(function);
  if (options.fuseElementwise) batchFusedSteps(program);
  if (options.planMemory) planMemory(program);
  pipeline.dumpText("program.txt", program.toText());
  pipeline.dumpText("program.dot", runtime::programToDot(program));
  pipeline.saveProgram(program);
  return program;
}

}  // namespace spmd
