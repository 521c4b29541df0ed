// The simulated accelerator behaves as a CUDA device does where it matters to the runtime: its
// work is asynchronous and in order on a stream, an error in queued work surfaces at the next
// synchronize (naming the work) and the stream skips what was queued after it, the device is
// usable again afterwards, and executors copy through its memory instead of reading host
// pointers. jit runs on it (devices = "sim") and gives the cpu backend's bits. The two-stage
// reductions give the same bits under every schedule the simulator draws.
#include <atomic>
#include <cstring>

#include "KernelCases.h"
#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/device/DeviceList.h"
#include "runtime/exec/DeviceArray.h"
#include "runtime/exec/Executor.h"
#include "runtime/sim/SimDevice.h"

namespace spmd::runtime {
namespace {

TEST(SimDeviceTest, QueuedErrorsSurfaceAtSynchronize) {
  SimDevice device(0);
  std::atomic<int> ran{0};
  device.enqueue("first", [&] { ++ran; });
  device.enqueue("step 7 'conv2d' (model.cpp:12)", [] { throw Error("bad descriptor"); });
  device.enqueue("after", [&] { ++ran; });  // skipped: the stream has failed
  try {
    device.synchronize();
    ADD_FAILURE() << "no error at synchronize";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "sim:0: asynchronous error in step 7 'conv2d' (model.cpp:12): bad descriptor");
  }
  EXPECT_EQ(ran.load(), 1);
  device.enqueue("again", [&] { ++ran; });
  EXPECT_NO_THROW(device.synchronize());
  EXPECT_EQ(ran.load(), 2);
}

TEST(SimDeviceTest, CopiesAreOrderedWithKernelsAndCounted) {
  SimDevice device(1);
  auto buffer = device.allocate(4 * sizeof(float));
  std::vector<float> in = {1, 2, 3, 4}, out(4);
  device.copyToDevice(buffer.get(), reinterpret_cast<const std::byte*>(in.data()), 16);
  in.assign(4, -1);  // the copy staged the source when it was queued, as cudaMemcpyAsync from pageable memory
  device.enqueue("double", [p = reinterpret_cast<float*>(buffer.get())] {
    for (int i = 0; i < 4; ++i) p[i] *= 2;
  });
  device.copyToHost(reinterpret_cast<std::byte*>(out.data()), buffer.get(), 16);
  EXPECT_EQ(out, (std::vector<float>{2, 4, 6, 8}));
  auto t = device.transfers();
  EXPECT_EQ(t.toDevice, 1);
  EXPECT_EQ(t.toHost, 1);
  EXPECT_EQ(t.bytesToDevice, 16);
  EXPECT_FALSE(device.hostAccessible());
}

TEST(SimDeviceTest, JitRunsOnTheSimulatorWithTheCpuBits) {
  auto f = [](const Tensor& a, const Tensor& b) { return relu(add(mul(a, b), exp(a))); };
  Array a = spmd::testing::randomArray(DType::f32, {3, 5}, 1), b = spmd::testing::randomArray(DType::f32, {3, 5}, 2);
  auto onSim = jit(f, {.devices = "sim"});
  auto onCpu = jit(f, {.devices = "cpu"});
  Tensor r = onSim(a, b);
  EXPECT_TRUE(r.onDevices());
  EXPECT_EQ(r.resident()->describe(), "f32[3, 5] on sim:0 (replicated)");
  spmd::testing::expectClose(r.array(), onCpu(a, b).array(), 1e-6, 0, "jit on sim vs cpu");
  try {
    jit(f, {.devices = "sim:2"});
    ADD_FAILURE() << "jit accepted two devices";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "jit 'main': device list 'sim:2' has 2 devices but jit runs on one; use spmd::pmap to run one "
              "replica per device, or name one device (e.g. sim:1)");
  }
}

// The per-channel reductions (runtime/kernels/Slices.h: BatchNorm's statistics and backward
// sums, reduce_*) cut their work by the shape alone and add the slices in order, so the blocks'
// order, which each SPMD_SIM_SEED draws anew (as a GPU's scheduler would), changes no bit; the
// cases with several slices per channel included. The race detector checks every launch.
TEST(SimDeviceTest, TwoStageReductionsGiveTheSameBitsUnderEverySchedule) {
  int checked = 0;
  for (DType t : {DType::f32, DType::f64})
    for (const KernelCase& c : kernelCases(t)) {
      if (c.op.rfind("batch_norm_train", 0) != 0 && c.op.rfind("reduce_", 0) != 0) continue;
      Program program = oneStepProgram(plainCase(c), "SimDeviceTest");
      std::vector<std::vector<Array>> runs;
      for (const char* seed : {"1", "2", "31337"}) {
        setenv("SPMD_SIM_SEED", seed, 1);
        Executor executor(program, makeDevice(parseDeviceList("sim"), 0));
        runs.push_back(executor.run(c.inputs));
        unsetenv("SPMD_SIM_SEED");
      }
      for (size_t r = 1; r < runs.size(); ++r)
        for (size_t o = 0; o < runs[0].size(); ++o)
          spmd::testing::expectClose(runs[r][o], runs[0][o], 0, 0, c.name + " output " + std::to_string(o) + ", seed " +
                                                                      std::to_string(r) + " vs the first");
      ++checked;
    }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace spmd::runtime
