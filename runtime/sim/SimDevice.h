// The simulated accelerator ("sim:N"): a Device that behaves like a CUDA GPU without one, so
// CI runs the CUDA backend's host path and kernel code. Its memory is separate allocations the
// executor never reads directly (hostAccessible() is false: every input and output goes through
// copyToDevice / copyToHost, which are counted); its work runs asynchronously, in order, on one
// stream thread per device; an error in queued work is kept and thrown by the next
// synchronize() (or copy to the host), as CUDA reports asynchronous errors. It captures graphs
// as a CUDA stream does (the same rules, so the executor's graph logic is tested without a GPU).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/device/Device.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime {

const KernelTable& simKernels();

// Its graphs: the recorded work items, queued again as they were (runtime/device/Graph.h).
class SimDevice final : public Device, public GraphCapture {
 public:
  explicit SimDevice(int index);
  ~SimDevice() override;
  std::string name() const override { return "sim:" + std::to_string(index_); }
  const KernelTable& kernels() const override { return simKernels(); }
  std::shared_ptr<std::byte> allocate(size_t bytes) override;
  bool hostAccessible() const override { return false; }
  bool readsLayout(std::string_view layout) const override { return layout.empty() || layout == kChannelsLast; }
  void copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyToHost(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) override;
  void synchronize() override;
  GraphCapture* graphs() override { return this; }
  std::unique_ptr<DeviceClock> clock() override;
  // Capture: only the capturing thread's work is recorded; a host synchronisation by that
  // thread while it captures throws CaptureBroken, as CUDA refuses it.
  void begin() override;
  size_t recorded() const override;
  std::shared_ptr<const Graph> end(size_t keep) override;
  void launch(const Graph& graph) override;

  // Work items queued to run so far (a graph's launch counts each of its items).
  int64_t queued() const;
  // For tests: end(keep) refuses to drop a graph's last items, as a CUDA graph holding memory
  // allocations does.
  void refusePartialGraphs(bool refuse);
  // Queues `work` on the stream; `what` names it in an error ("step 3 'add' (model.cpp:12)").
  void enqueue(std::string what, std::function<void()> work);

 private:
  void stream();
  int index_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::pair<std::string, std::function<void()>>> queue_;
  bool busy_ = false, stop_ = false;
  std::optional<std::string> error_;  // the first failure since the last synchronize
  std::optional<std::thread::id> capturer_;  // the thread whose work is recorded, while it captures
  std::vector<std::pair<std::string, std::function<void()>>> recorded_;
  int64_t queued_ = 0;
  bool refusePartial_ = false;
  void refuseWhileCapturing(const char* what) const;
  std::thread thread_;
};

}  // namespace spmd::runtime
