// The timeline's device track (runtime/exec/Executor.h): on a device with its own clock (the
// simulator here; CUDA events on a GPU), a traced run puts every step on the device's track as
// well as on the replica's, each span as long as the step took on the device. Its own suite and
// file: starting the timeline lasts for the process, which no other suite should share.
#include <fstream>
#include <sstream>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/base/Timeline.h"

namespace spmd {
namespace {

using spmd::testing::countOccurrences;

// A trace path that cannot be written is refused when tracing starts (before the first step),
// not after the whole run when the file is written; a refused path starts nothing.
TEST(DeviceTraceTest, AnUnwritableTracePathIsRefusedWhenTracingStarts) {
  std::string message = testing::errorOf([] { runtime::timeline::start("/nonexistent-spmd-dir/trace.json"); });
  EXPECT_NE(message.find("the trace file /nonexistent-spmd-dir/trace.json (SPMD_TRACE, PmapOptions::trace, --trace) "
                         "cannot be written: its directory /nonexistent-spmd-dir does not exist"),
            std::string::npos)
      << message;
  message = testing::errorOf([] { runtime::timeline::start(::testing::TempDir()); });
  EXPECT_NE(message.find("it is a directory"), std::string::npos) << message;
  EXPECT_FALSE(runtime::timeline::on());
}

TEST(DeviceTraceTest, EachStepIsASpanOnTheDevicesOwnTrack) {
  const testing::ScratchDir dir("spmd-device-trace");
  const std::string path = dir / "trace.json";
  runtime::timeline::start(path);
  auto f = jit([](const Tensor& x) { return sum(tanh(x) * 2.0 + exp(x), {0}); }, {.devices = "sim"});
  Array x = spmd::testing::randomArray(DType::f32, {64, 3}, 5);
  for (int call = 0; call < 2; ++call) f(x).array();
  const size_t steps = f.lastProgram().steps.size();
  ASSERT_EQ(runtime::timeline::write(), path);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_NE(text.str().find("\"device sim:0\""), std::string::npos) << "the device's track is named";
  EXPECT_EQ(countOccurrences(text.str(), "\"cat\": \"device\""), 2 * steps) << "each step of both calls on the device's track";
  EXPECT_EQ(countOccurrences(text.str(), "\"cat\": \"step\""), 2 * steps) << "and on the replica's, as launched";
}

}  // namespace
}  // namespace spmd
