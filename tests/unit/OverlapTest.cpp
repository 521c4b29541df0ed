// The gradient all-reduce overlapped with the backward pass (DDP's buckets): with a communicator
// that runs collectives in the background, the executor hands each bucket off as soon as its
// gradients exist and waits for it only where a step reads the result. Checked as the order of
// the executor's events, not as a timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "TestUtil.h"
#include "frontend/spmd.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/device/InProcessCommunicator.h"
#include "runtime/exec/Executor.h"

namespace spmd {
namespace {

using runtime::Executor;

// One replica whose all-reduces run "in the background" when the caller allows it: allReduce
// copies the operands out, and the handle's wait() reduces them (a real one-rank fold) and
// writes the results back.
class BackgroundCommunicator final : public runtime::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Pending allReduce(std::span<const Segment> in, std::span<const Segment> out, DType dtype, runtime::Reduction op,
                    const std::string& what, bool background) override {
    if (!background) return inner_.allReduce(in, out, dtype, op, what);
    auto bytes = std::make_shared<std::vector<std::byte>>();
    for (const Segment& s : in) {
      auto* p = static_cast<const std::byte*>(s.data);
      bytes->insert(bytes->end(), p, p + s.count * dtypeSize(dtype));
    }
    std::vector<Segment> results(out.begin(), out.end());
    return Pending([this, bytes, results, dtype, op, what] {
      inner_.allReduceInPlace(bytes->data(), dtype, int64_t(bytes->size() / dtypeSize(dtype)), op, what);
      size_t offset = 0;
      for (const Segment& s : results) {
        std::memcpy(s.data, bytes->data() + offset, s.count * dtypeSize(dtype));
        offset += s.count * dtypeSize(dtype);
      }
    });
  }
  Pending allGather(const void* in, void* out, size_t bytes, const std::string& what, bool) override {
    return inner_.allGather(in, out, bytes, what);
  }
  void barrier(const std::string& what) override { inner_.barrier(what); }
  void abort(const std::string& error) override { inner_.abort(error); }

 private:
  runtime::InProcessCommunicator inner_{std::make_shared<runtime::InProcessGroup>(1, std::chrono::seconds(10)), 0};
};

TEST(OverlapTest, EachBucketsAllReduceStartsBeforeTheBackwardPassEnds) {
  // Three dense layers, buckets of at most one layer's gradients: several all-reduces, the first
  // (the last layer's gradients, computed first) ready long before the first layer's.
  auto loss = [](const Tree& p, const Tensor& x) {
    Tensor h = tanh(matmul(x, p.at("w1")));
    h = tanh(matmul(h, p.at("w2")));
    return mean(mul(matmul(h, p.at("w3")), matmul(h, p.at("w3"))), {0, 1});
  };
  auto step = pmap(
      [&](const Tree& p, const Tensor& x) {
        auto [l, g] = value_and_grad([&](const Tree& q) { return loss(q, x); })(p);
        Tree next;
        for (const char* name : {"w1", "w2", "w3"}) next.set(name, sub(p.at(name), mul(g.at(name), fill(g.at(name), 0.1))));
        return std::tuple{next, l};
      },
      {.inAxes = {replicated, split}, .devices = "cpu:1", .bucketBytes = 32 * 32 * 4});
  Tree params;
  params.set("w1", testing::randomArray(DType::f32, {16, 32}, 1));
  params.set("w2", testing::randomArray(DType::f32, {32, 32}, 2));
  params.set("w3", testing::randomArray(DType::f32, {32, 8}, 3));
  Array x = testing::randomArray(DType::f32, {4, 16}, 4);
  auto [expectedParams, expectedLoss] = step(params, x);
  const runtime::Program& program = step.lastProgram();

  std::vector<size_t> allReduces;
  for (size_t s = 0; s < program.steps.size(); ++s)
    if (program.steps[s].op == "all_reduce") allReduces.push_back(s);
  ASSERT_GE(allReduces.size(), 2u) << "the test needs several buckets:\n" << step.lastProgramText();
  // The backward pass ends with the step that computes the last bucket's last gradient.
  size_t backwardEnd = 0;
  for (int id : program.steps[allReduces.back()].inputs)
    for (size_t s = 0; s < allReduces.back(); ++s) {
      const auto& outs = program.steps[s].outputs;
      if (std::find(outs.begin(), outs.end(), id) != outs.end()) backwardEnd = std::max(backwardEnd, s);
    }

  BackgroundCommunicator comm;
  Executor executor(program, std::make_shared<runtime::CpuDevice>());
  executor.setCommunicator(&comm);
  std::vector<Executor::Event> events;
  executor.recordEvents(&events);
  std::vector<Array> inputs = {params.at("w1").array(), params.at("w2").array(), params.at("w3").array(), x};
  std::vector<Array> outputs = executor.run(inputs);

  auto position = [&](Executor::Event::Kind kind, size_t s) -> std::ptrdiff_t {
    auto it = std::find_if(events.begin(), events.end(), [&](const auto& e) { return e.kind == kind && e.step == s; });
    return it == events.end() ? -1 : it - events.begin();
  };
  std::ptrdiff_t end = position(Executor::Event::StepDone, backwardEnd);
  ASSERT_GE(end, 0);
  for (size_t k = 0; k + 1 < allReduces.size(); ++k) {
    SCOPED_TRACE("bucket " + std::to_string(k) + ", step " + std::to_string(allReduces[k]));
    std::ptrdiff_t started = position(Executor::Event::BackgroundStarted, allReduces[k]);
    std::ptrdiff_t finished = position(Executor::Event::BackgroundFinished, allReduces[k]);
    ASSERT_GE(started, 0) << "the all-reduce did not run in the background";
    EXPECT_LT(started, end) << "started after the backward pass ended";
    EXPECT_GT(finished, end) << "waited for before the backward pass ended";
  }
  // And the overlapped step computes what the synchronous one does.
  testing::expectClose(outputs.back(), expectedLoss.array(), 0, 0, "loss");
  for (int i = 0; i < 3; ++i)
    testing::expectClose(outputs[i], expectedParams.at("w" + std::to_string(i + 1)).array(), 0, 0, "w" + std::to_string(i + 1));
}

}  // namespace
}  // namespace spmd
