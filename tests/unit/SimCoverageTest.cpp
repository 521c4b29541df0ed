// Every kernel the CUDA backend can launch from our own code executes on the simulator: the
// kernel library's ops (grid-stride and block kernels), the matmul bias, the exact all-reduce's
// fold (NCCL's too), the in-process collectives' device barrier, the GEMM convolution's
// unfolding, and the generated
// kernel of every fused body of the ResNet-18 and transformer training steps. The workloads are
// the sim suite's own (every kernel case, as CudaKernelTest runs them; a ResNet-18 training step
// and the collectives on sim:2, as ConformanceTest; the transformer block of TorchReferenceTest), run here so that the
// simulator's record of what executed (runtime/sim/Coverage.h) can be read in one process.
#include <gtest/gtest.h>

#include <set>

#include "KernelCases.h"
#include "TestUtil.h"
#include "TransformerBlock.h"
#include "benchmarks/TrainStep.h"
#include "frontend/models/ResNet.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/exec/Executor.h"
#include "runtime/kernels/FusedSource.h"
#include "runtime/program/FusedBody.h"
#include "runtime/sim/Coverage.h"
#include "runtime/sim/SimDevice.h"
#ifdef SPMD_WITH_CUDA
#include "runtime/cuda/CudaDevice.h"
#endif

namespace spmd::runtime {
namespace {

// The generated kernel source of every fused step of `program`, as both backends build it.
std::set<std::string> fusedSources(const Program& program) {
  std::set<std::string> sources;
  for (const Step& s : program.steps) {
    if (s.op == "fused") sources.insert(kernels::fusedKernelSource(s, program));
  }
  return sources;
}

// Ops the simulator serves with the CPU backend's code, as the CUDA backend hands them to cuDNN
// or cuBLAS: not our device code.
bool libraryStandIn(const Kernel& k) { return k.source.find("the CPU backend's kernel") != std::string_view::npos; }

TEST(SimCoverageTest, EveryKernelTheCudaBackendLaunchesExecutesOnTheSimulator) {
  std::shared_ptr<Device> sim = makeDevice(parseDeviceList("sim"), 0);
  for (DType dtype : {DType::f32, DType::f64})
    for (const KernelCase& given : everyKernelCase(dtype)) {
      const bool asGiven = given.readBy(*sim);  // channels-last as given, the CPU's blocked layouts plain
      if (given.op == "relayout" && !asGiven) continue;
      KernelCase c = asGiven ? given : plainCase(given);
      Executor(oneStepProgram(c, "SimCoverageTest"), sim).run(inputsInLayout(c));
    }
  {  // the plain convolutions again through the CUDA backend's GEMM variant (kernels/ConvGemm.h);
     // pinned, a dilated or grouped one is refused saying so
    PinnedKernels pin("conv2d:gemm,conv2d_backward_data:gemm,conv2d_backward_filter:gemm");
    int refused = 0;
    for (const KernelCase& c : kernelCases(DType::f32)) {
      if (c.op.rfind("conv2d", 0) != 0) continue;
      auto run = [&] { Executor(oneStepProgram(plainCase(c), "SimCoverageTest"), sim).run(plainCase(c).inputs); };
      if (plainConvolution(c)) {
        run();
        continue;
      }
      const std::string error = spmd::testing::errorOf(run);
      EXPECT_NE(error.find("(neither dilated nor grouped)"), std::string::npos) << c.name << ": " << error;
      ++refused;
    }
    EXPECT_GE(refused, 6);
  }

  auto model = models::resnet18({.width = 2, .bnAxisName = "batch"});
  optim::Sgd sgd({.learningRate = 0.05, .momentum = 0.9});
  auto [x, y] = bench::syntheticBatch(4);
  auto resnet = pmap(bench::trainStep(*model, sgd),
                     {.inAxes = {replicated, replicated, replicated, split, split}, .devices = "sim:2"});
  auto [params, state] = model->initialize(3);
  resnet(params, sgd.init(params), state, x, y);

  auto collectives = pmap(
      [](const Tensor& v, const Tensor& s) {
        return std::tuple{psum(v, "i"), pmax(v, "i"), allGather(v, "i"), psumScatter(s, "i"), axisIndex("i"),
                          ppermute(v, "i", {{0, 1}}), allToAll(s, "i", 0, 1)};
      },
      {.axisName = "i", .outAxes = {replicated, replicated, replicated, 0, 0, 0, 0}, .devices = "sim:2"});
  collectives(spmd::testing::randomArray(DType::f32, {2, 5}, 11), spmd::testing::randomArray(DType::f32, {2, 2, 3}, 12));

  const int64_t vocab = 11, heads = 2;
  auto transformer = jit([&](const Tree& q, const Tensor& tokens, const Tensor& next) {
    return value_and_grad([&](const Tree& r) {
      Tensor logits = spmd::testing::transformerLogits(r, tokens, heads);
      return mean(softmaxCrossEntropy(reshape(logits, {-1, vocab}), reshape(next, {-1})), {0});
    })(q);
  }, {.devices = "sim"});
  Array ids = Array::of<int32_t>({2, 5}, std::vector<int32_t>{1, 4, 4, 9, 0, 10, 3, 3, 7, 2});
  transformer(spmd::testing::transformerParams(vocab, 8, 32, 40), ids, ids);

  const std::set<std::string> ops = sim::executedOps(), sources = sim::executedSources();
  int checked = 0;
  for (const auto& [op, kernel] : simKernels()) {
    // custom_call runs the user's kernel (CustomOpTest runs its CUDA path on sim, races and all).
    if (libraryStandIn(kernel) || op == "fused" || op == "custom_call") continue;
    EXPECT_TRUE(ops.count(op)) << op << " (" << kernel.source << ") never executed on the simulator";
    ++checked;
  }
  EXPECT_GT(checked, 40);  // 53 today: the table is not empty
  size_t generated = 0;
  for (const Program* program : {&resnet.lastProgram(), &transformer.lastProgram()})
    for (const std::string& source : fusedSources(*program)) {
      EXPECT_TRUE(sources.count(source)) << "a generated kernel never executed on the simulator:\n" << source;
      ++generated;
    }
  EXPECT_GT(generated, 20u);
  // The kernels the CUDA backend launches beside the library's table: BatchNorm's block and apply
  // kernels, the matmul bias, the fold of NCCL's exact all-reduce (runtime/cuda/NcclFold.cu),
  // which the in-process all-reduce folds with too, the in-process collectives' device barrier
  // and guarded copies, and the GEMM convolution's unfolding (GemmFn is the simulator's cuBLAS).
  const std::set<std::string> kernels = sim::executedKernels();
  for (const char* functor : {"NormSliceFn<", "NormFinishFn<", "NormApplyFn<", "NormBackwardSliceFn<", "NormBackwardFinishFn<",
                              "NormBackwardApplyFn<", "ReduceSliceFn<", "ReduceFinishFn<",
                              "RowBiasFn<", "FoldRowsFn<", "RendezvousFn", "CopyIfMetFn<", "Im2colFn<", "Col2imFn<",
                              "ToChannelMajorFn<", "FromChannelMajorFn<", "GemmFn<"}) {
    bool ran = false;
    for (const std::string& k : kernels) ran |= k.find(std::string("spmd::runtime::kernels::") + functor) == 0;
    EXPECT_TRUE(ran) << functor << " never executed on the simulator (" << kernels.size() << " kernels did)";
  }
  std::printf("  %d ops and %zu generated kernels executed on the simulator\n", checked, generated);

#ifdef SPMD_WITH_CUDA
  // What the CUDA backend runs of our own code is what the simulator runs.
  for (const auto& [op, kernel] : cudaKernels()) {
    const bool ours = kernel.source.find("kernel library") != std::string_view::npos || op == "fused";
    if (ours) {
      EXPECT_FALSE(libraryStandIn(simKernels().at(op))) << op << " runs our code on CUDA but not on sim";
    }
  }
#endif
}

}  // namespace
}  // namespace spmd::runtime
