// What must not drift between environments, as bits: each workload below runs twice here (the
// same bits run to run), and with SPMD_DRIFT_BITS set its bits' hash is appended to that file,
// which tests/drift_bits.py compares across OMP_NUM_THREADS=1, 2, oneDNN and our kernels held to AVX2,
// and our kernels held to their portable code (SPMD_MAX_CPU_ISA).
//  - own kernels: a pmap step on cpu:4 that only our own kernels run (elementwise, fused,
//    reductions, softmax cross-entropy, the all-reduce's fold tree): their results depend on
//    the shapes alone, not on threads or the instruction set.
//  - pinned threads: a ResNet-18 training step on cpu:2 with one thread per replica
//    (PmapOptions::threadsPerReplica): oneDNN's kernels included, the bits depend on that
//    setting and the instruction set, not on how many threads the process has.
//  - thread-invariant: a ResNet-18 training step on cpu:1 with the default threads (1 under
//    OMP_NUM_THREADS=1, 2 under 2) and thread-invariant kernels only (SPMD_THREAD_INVARIANT):
//    the bits depend on the instruction set, not on the threads per replica.
#include <cstdlib>
#include <fstream>

#include "TestUtil.h"
#include "ResNetStep.h"
#include "frontend/spmd.h"
#include "runtime/device/Variants.h"

namespace spmd {
namespace {

uint64_t hashOf(const std::vector<Array>& arrays) {
  std::string bytes;
  for (const Array& a : arrays) bytes.append(reinterpret_cast<const char*>(a.data()), a.bytes());
  return detail::fnv1a(bytes);
}

std::vector<Array> ownKernels() {
  auto step = pmap(
      [](const Tensor& w, const Tensor& x, const Tensor& y) {
        return value_and_grad([&](const Tensor& v) {
          Tensor h = tanh(add(mul(x, broadcastTo(v, x.shape())), sigmoid(x)));
          Tensor logits = sub(h, broadcastTo(reshape(mean(h, {1}), {h.dim(0), 1}), h.shape()));
          return mean(softmaxCrossEntropy(logits, y), {0});
        })(w);
      },
      {.inAxes = {replicated, split, split}, .devices = "cpu:4"});
  Array w = testing::randomArray(DType::f32, {37}, 1), x = testing::randomArray(DType::f32, {64, 37}, 2, -3, 3);
  std::vector<int32_t> labels(64);
  for (int i = 0; i < 64; ++i) labels[i] = (i * 11) % 37;
  auto [loss, grad] = step(w, x, Array::of<int32_t>({64}, labels));
  return {loss.array(), grad.array()};
}

std::vector<Array> pinnedThreads() {
  return testing::resnetStepOutputs(2, 8, 3, {.devices = "cpu:2", .threadsPerReplica = 1});
}

std::vector<Array> invariantThreads() {
  runtime::setThreadInvariantKernels(true);
  std::vector<Array> out = testing::resnetStepOutputs(4, 8, 4, {.devices = "cpu:1"});
  runtime::setThreadInvariantKernels(std::nullopt);
  return out;
}

TEST(DriftBitsTest, OwnKernelsAndPinnedThreadsGiveTheirBitsRunToRun) {
  const char* file = std::getenv("SPMD_DRIFT_BITS");
  for (auto [name, workload] : {std::pair{"own kernels", &ownKernels}, std::pair{"pinned threads", &pinnedThreads},
                                std::pair{"thread-invariant", &invariantThreads}}) {
    uint64_t first = hashOf(workload()), second = hashOf(workload());
    EXPECT_EQ(first, second) << name << ": two runs differ";
    if (file) std::ofstream(file, std::ios::app) << name << " " << std::hex << first << "\n";
  }
}

}  // namespace
}  // namespace spmd
