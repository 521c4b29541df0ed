// spmd-run PROGRAM [--devices LIST] [--steps N] [--warmup N] [--items N] [--print]  (see --help)
// spmd-run --kernels [BACKEND]: which code serves each op on each backend (or on BACKEND).
// Loads a Program saved by the compiler (SPMD_DUMP_IR=<dir> writes <dir>/program.spmd), runs it
// with one replica per device on deterministic synthetic inputs (floats in [-1, 1), integers 0)
// placed as the program's call contract says, feeding each donated output back in place of its
// input as a training loop does, and prints the time per step. Links only the runtime: this is how compiled steps run where
// LLVM/MLIR is not installed.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <random>
#include <string>

#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Variants.h"
#include "runtime/program/ProgramFile.h"
#include "runtime/base/Parse.h"
#include "runtime/base/Timeout.h"
#include "runtime/exec/ReplicaGroup.h"
#include "runtime/exec/MeshParts.h"
#include "runtime/exec/ReplicatedCall.h"
#include "runtime/mpi/Processes.h"
#include "tools/cli/Cli.h"

namespace {

using namespace spmd;

Array synthetic(const runtime::BufferDesc& desc, uint64_t seed) {
  Array a = Array::zeros(desc.dtype, desc.shape);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  if (desc.dtype == DType::f32)
    for (float& v : a.values<float>()) v = static_cast<float>(uniform(rng));
  if (desc.dtype == DType::f64)
    for (double& v : a.values<double>()) v = uniform(rng);
  if (desc.dtype == DType::bf16)
    for (bf16& v : a.values<bf16>()) v = toBf16(static_cast<float>(uniform(rng)));
  return a;  // i32 stays 0: a valid label and index
}

// Prints, for `only` (every backend when empty, and the reference kernels), each op's kernel
// and what serves it, sorted by op.
int listKernels(const std::string& only) {
  std::vector<std::pair<std::string, const runtime::KernelTable*>> tables;
  if (only.empty() || only == "reference") tables.emplace_back("reference", &runtime::referenceKernels());
  for (const std::string& backend : runtime::driverNames())
    if (only.empty() || only == backend) tables.emplace_back(backend, &runtime::driverFor(backend, backend).kernels());
  if (tables.empty()) {
    std::string known = "reference";
    for (const std::string& backend : runtime::driverNames()) known += ", " + backend;
    throw Error("--kernels: no backend '" + only + "' in this build (it has " + known + ")");
  }
  for (const auto& [backend, table] : tables) {
    std::map<std::string, const runtime::Kernel*> sorted;
    for (const auto& [op, kernel] : *table) sorted.emplace(op, &kernel);
    std::printf("%s: %zu ops\n", backend.c_str(), sorted.size());
    // The machine kind its variants are timed and kept for (CPU: model, oneDNN's ISA and ours).
    for (const auto& [op, kernel] : sorted)
      if (kernel->variants && kernel->variants->device) {
        std::printf("  variants timed for: %s\n", kernel->variants->device().c_str());
        break;
      }
    for (const auto& [op, kernel] : sorted) {
      std::printf("  %-32s %.*s\n", op.c_str(), int(kernel->source.size()), kernel->source.data());
      if (kernel->variants)
        for (const runtime::KernelVariant& v : kernel->variants->variants)
          std::printf("      %-18s %s%s%s\n", v.name, v.why, v.threadInvariant ? " [same bits on any thread count]" : "",
                      v.looseRounding ? " [loose rounding: left out by SPMD_TIGHT_ROUNDING=1]" : "");
    }
  }
  return 0;
}

int run(int argc, char** argv) {
  std::string path, devices, kernelsOf;
  int steps = 20, warmup = 3;
  int64_t items = 0;
  bool print = false;
  spmd::cli::Flags app(
      "spmd-run",
      "Runs a Program saved by the compiler (SPMD_DUMP_IR=<dir> writes <dir>/program.spmd) with one replica "
      "per device on synthetic inputs and prints the time per step; --kernels lists which code serves each "
      "op on each backend.");
  app.positional("PROGRAM", path, "the program.spmd file", "FILE");
  app.text("--devices", devices, "cpu:1, sim:2, cuda:0, cuda:0*2, ... (default $SPMD_DEVICES, else cpu:1)", "LIST");
  app.whole("--steps", steps, 1, INT32_MAX, "timed runs");
  app.whole("--warmup", warmup, 0, INT32_MAX, "untimed runs first");
  app.whole("--items", items, 0, INT32_MAX, "items (images) per run, to print items/s (0: not printed)");
  app.flag("--print", print, "print the Program's text first");
  bool kernels = false;
  app.optionalText("--kernels", kernelsOf, kernels,
                   "list each op's kernel and its variants, on every backend or on BACKEND; "
                   "with PROGRAM, which variant each step ran and why",
                   "[BACKEND]");
  if (auto stop = app.parse(argc, argv)) return *stop;
  if (kernels && !path.empty() && !kernelsOf.empty()) {
    std::fprintf(stderr, "spmd-run: error: --kernels with a program file takes no backend: give it with --devices\n");
    return 2;
  }
  if (kernels && path.empty()) return listKernels(kernelsOf);
  if (path.empty()) {
    std::fprintf(stderr, "spmd-run: error: no program file given (see --help)\n");
    return 2;
  }
  runtime::Program program = runtime::loadProgram(path);
  if (print) std::fputs(program.toText().c_str(), stdout);
  runtime::DeviceList list = runtime::parseDeviceList(devices);
  runtime::ReplicaGroup group(program, list, runtime::jobOf(program), runtime::collectiveTimeoutFromEnvironment());
  // The call as the program's contract has it: a replicated input the same on every replica, a
  // mapped one as each replica's chunk of one global value, a sliced one as the replicas' slices
  // of its full shape, a mesh one as each replica's block of the whole value. After each run, every output the contract pairs with an input takes that
  // input's place, donated (parameters and optimizer state updated in place, as a training loop
  // runs it); outputs stay on the devices.
  const int devicesHere = list.size();
  std::vector<Array> hostInputs;
  std::vector<runtime::CallArgument> arguments;
  for (size_t i = 0; i < program.inputs.size(); ++i) {
    runtime::BufferDesc global = program.buffers[program.inputs[i]];
    const runtime::Placement& placement = program.inputPlacements[i];
    if (placement.kind == runtime::Placement::Kind::Sliced) global.shape = placement.full;
    if (placement.kind == runtime::Placement::Kind::Mapped)
      global.shape.insert(global.shape.begin(), devicesHere);  // stacked: [devices, one replica's shape]
    if (placement.kind == runtime::Placement::Kind::Mesh)  // the whole value; each replica takes its block
      global.shape = runtime::meshWholeShape(global.shape, program.mesh, placement.spec);
    hostInputs.push_back(synthetic(global, 1000 * i));
  }
  for (const Array& a : hostInputs) arguments.push_back({nullptr, &a, false});
  runtime::CallLayout layout{.stacked = {}, .perReplicaOutputs = false, .who = "spmd-run's previous step"};
  for (const runtime::Placement& p : program.outputPlacements)
    layout.stacked.push_back(p.kind == runtime::Placement::Kind::Mapped);
  int donated = 0;
  for (int i : program.outputDonors) donated += i >= 0;
  std::vector<std::shared_ptr<runtime::DeviceArray>> results;
  auto step = [&] {
    results = runtime::callReplicated(group, arguments, layout);
    for (size_t k = 0; k < results.size(); ++k)
      if (int i = program.outputDonors[k]; i >= 0) arguments[size_t(i)] = {results[k], nullptr, true};
  };
  auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < warmup; ++s) step();
  double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) step();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / steps;
  std::printf("@%s on %s: %zu steps in the program, arena %.1f MB per replica; warm-up %.3f s for %d runs; "
              "%.3f ms per run over %d runs",
              program.name.c_str(), list.spec.c_str(), program.steps.size(), double(program.arenaBytes) / 1e6,
              first, warmup, seconds * 1e3, steps);
  if (items) std::printf(", %.1f items/s", double(items) / seconds);
  std::printf("; %d of %zu inputs updated in place (donated outputs)\n", donated, program.inputs.size());
  // A replicated output must hold the same bits on every replica (as pmap's drift check asks).
  int replicated = 0;
  for (size_t k = 0; k < results.size(); ++k) {
    if (program.outputPlacements[k].kind != runtime::Placement::Kind::Replicated) continue;
    replicated++;
    for (int r = 1; r < results[k]->replicas(); ++r)
      if (results[k]->replicaBytes(r) != results[k]->replicaBytes(0))
        throw Error("replicated output " + std::to_string(k) + " (" + results[k]->describe() + ") differs between replica 0 and replica " +
                    std::to_string(r) + " after the last step: the program's replicas diverged (a kernel whose "
                    "result depends on the replica, or a collective that did not reduce every replica's value)");
  }
  if (list.size() > 1) std::printf("%d replicated outputs hold the same bits on every replica\n", replicated);
  // A mesh output's blocks must agree where its spec leaves it whole: reading it checks that.
  int onMesh = 0;
  for (size_t k = 0; k < results.size(); ++k)
    if (program.outputPlacements[k].kind == runtime::Placement::Kind::Mesh) onMesh++, (void)results[k]->host();
  if (onMesh) std::printf("%d mesh outputs put together on %s: their copies agree\n", onMesh, program.mesh.describe().c_str());
  if (kernels) {
    const runtime::Executor& replica = group.executor(0);
    for (size_t s = 0; s < program.steps.size(); ++s)
      if (!replica.variantOf(s).empty())
        std::printf("  step %zu %s (%s): %s\n", s, program.steps[s].op.c_str(), program.steps[s].where().c_str(),
                    replica.variantOf(s).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spmd-run: %s\n", e.what());
    return 1;
  }
}
