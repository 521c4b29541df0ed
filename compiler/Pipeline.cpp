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
#include "passes/RematCandidates.h"
#include "runtime/program/MemoryPlan.h"

namespace spmd {
namespace {

std::string megabytes(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  return text;
}

// The compiler's remat choice in words, for the dump (memory-budget.txt).
std::string describeRemat(mlir::ModuleOp module, const CompileOptions& options, const runtime::Program& program) {
  std::string text = "memory budget " + megabytes(size_t(options.memoryBudget)) + " per replica; planned " +
                     megabytes(runtime::residentBytes(program, false)) + "\nrecomputed in the backward pass:";
  int count = 0;
  module.walk([&](mlir::func::FuncOp function) {
    if (auto chosen = function->getAttrOfType<mlir::ArrayAttr>("spmd.remat_chosen"))
      for (mlir::Attribute layer : chosen) text += " " + llvm::cast<mlir::StringAttr>(layer).str(), ++count;
  });
  return text + (count ? "" : " nothing (the plan fits as it is)") + "\n";
}

// Why the budget cannot be met even with every candidate recomputed: the plan, and the largest
// values live at its fullest step, where they come from.
std::string budgetUnmet(const runtime::Program& program, const CompileOptions& options, int64_t candidates) {
  const runtime::PeakLive peak = runtime::peakLive(program);
  std::vector<int> producer(program.buffers.size(), -1);
  for (size_t s = 0; s < program.steps.size(); ++s)
    for (int id : program.steps[s].outputs) producer[size_t(id)] = int(s);
  std::vector<bool> input(program.buffers.size(), false);
  for (int id : program.inputs) input[size_t(id)] = true;
  std::string text = "the memory budget of " + megabytes(size_t(options.memoryBudget)) +
                     " per replica cannot be met: even recomputing all " + std::to_string(candidates) +
                     " layers it may recompute in the backward pass, the plan needs " +
                     megabytes(runtime::residentBytes(program, false)) + " (arena " + megabytes(program.arenaBytes) +
                     ")";
  if (peak.step >= 0) {
    text += "; at its fullest step (" + std::to_string(peak.step) + " '" + program.steps[size_t(peak.step)].op +
            "', " + program.steps[size_t(peak.step)].where() + ", " + megabytes(peak.bytes) +
            " live) the largest values are:";
    for (size_t i = 0; i < peak.buffers.size() && i < 5; ++i) {
      const int id = peak.buffers[i];
      const runtime::BufferDesc& b = program.buffers[size_t(id)];
      text += "\n  " + megabytes(b.bytes()) + " " + std::string(dtypeName(b.dtype)) + shapeString(b.shape) + ", ";
      if (input[size_t(id)])
        text += "an input of the step";
      else if (producer[size_t(id)] >= 0)
        text += "from '" + program.steps[size_t(producer[size_t(id)])].op + "' at " +
                program.steps[size_t(producer[size_t(id)])].where();
      else
        text += "a constant";
    }
  }
  return text + "\nRaise the budget, lower the batch size, or shard the parameters and optimizer state "
                "(PmapOptions::fullyShard)";
}

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
    if (mlir::failed(manager.run(module_))) diagnostics.failIn("the compiler's pass --" + name);
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

namespace {

// One run of the pipeline on `module`; `rematSegments` >= 0: first mark that many of the
// compiler's candidate segments for recomputation (spmd-mark-remat). `dumpDir` "": no dumps.
runtime::Program compileOnce(mlir::ModuleOp module, const CompileOptions& options, const std::string& dumpDir,
                             int64_t rematSegments) {
  PipelineRun pipeline(module, dumpDir, options.dumpDir.empty() ? "SPMD_DUMP_IR" : "the dumpDir option");
  pipeline.verify("tracing");
  if (rematSegments >= 0) pipeline.run(passes::createMarkRemat({rematSegments, 2}));
  pipeline.run(passes::createInsertPmean({options.strict}));
  pipeline.run(passes::createAutodiff());
  pipeline.run(mlir::createCanonicalizerPass());
  pipeline.run(mlir::createCSEPass());
  if (options.shardUpdate) pipeline.run(passes::createShardUpdate());
  if (options.shardUpdate && options.gatherAtUse) pipeline.run(passes::createGatherAtUse());
  if (options.shardUpdate) pipeline.run(passes::createCombineShardedCollectives({options.shardedBucketBytes, options.prefetchGathers}));
  pipeline.run(passes::createCombineAllReduce({options.bucketBytes}));
  pipeline.run(passes::createWidenBf16({options.bf16Kernels}));
  pipeline.run(passes::createReplication());
  if (options.fuseElementwise) pipeline.run(passes::createFuseRelu());
  if (options.fuseElementwise) pipeline.run(passes::createFuseElementwise());
  if (!options.activationLayout.empty()) pipeline.run(passes::createAssignLayouts({options.activationLayout}));

  auto function = module.lookupSymbol<mlir::func::FuncOp>(options.entry);
  if (!function) throw Error("compile: the module has no function @" + options.entry);
  runtime::Program program = lowerToProgram(function);
  if (options.fuseElementwise) batchFusedSteps(program);
  if (options.planMemory) planMemory(program);
  pipeline.dumpText("program.txt", program.toText());
  pipeline.dumpText("program.dot", runtime::programToDot(program));
  pipeline.saveProgram(program);
  if (rematSegments >= 0) pipeline.dumpText("memory-budget.txt", describeRemat(module, options, program));
  return program;
}

}  // namespace

runtime::Program compile(mlir::ModuleOp module, const CompileOptions& options) {
  if (options.memoryBudget <= 0) return compileOnce(module, options, dumpDirectory(options), -1);
  const int64_t candidates = int64_t(passes::rematCandidates(module).size());
  auto probe = [&](int64_t segments) {
    mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
    return compileOnce(*copy, options, "", segments);
  };
  auto fits = [&](const runtime::Program& p) { return runtime::residentBytes(p, false) <= size_t(options.memoryBudget); };
  // The fewest segments that fit, by bisection (the plan shrinks as segments are added, largest
  // first); then the real compile, with dumps, on the module itself.
  int64_t chosen = 0;
  if (!fits(probe(0))) {
    runtime::Program all = probe(candidates);
    if (!fits(all)) throw Error(budgetUnmet(all, options, candidates));
    int64_t lo = 0, hi = candidates;
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      (fits(probe(mid)) ? hi : lo) = mid;
    }
    chosen = hi;
  }
  return compileOnce(module, options, dumpDirectory(options), chosen);
}

}  // namespace spmd
