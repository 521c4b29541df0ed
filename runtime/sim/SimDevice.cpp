// SimDevice: separate allocations, a stream thread, errors kept until synchronize.
#include "runtime/sim/SimDevice.h"

#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <memory>
#include <cstring>
#include <vector>

#include "runtime/base/CopyBytes.h"
#include "runtime/base/HostMemory.h"

namespace spmd::runtime {

SimDevice::SimDevice(int index) : index_(index), thread_([this] { stream(); }) {}

SimDevice::~SimDevice() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SimDevice::stream() {
  for (;;) {
    std::pair<std::string, std::function<void()>> item;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      item = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    std::optional<std::string> failure;
    {
      std::lock_guard lock(mutex_);
      if (error_) item.second = nullptr;  // after a failure the stream skips work, as CUDA's does
    }
    if (item.second) {
      try {
        item.second();
      } catch (const std::exception& e) {
        failure = item.first + ": " + e.what();
      }
    }
    std::lock_guard lock(mutex_);
    if (failure && !error_) error_ = failure;
    busy_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
}

void SimDevice::enqueue(std::string what, std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    if (capturer_ == std::this_thread::get_id()) {
      recorded_.emplace_back(std::move(what), std::move(work));
      return;
    }
    queue_.emplace_back(std::move(what), std::move(work));
    ++queued_;
  }
  wake_.notify_one();
}

void SimDevice::refuseWhileCapturing(const char* what) const {
  std::lock_guard lock(mutex_);
  if (capturer_ == std::this_thread::get_id())
    throw CaptureBroken(name() + ": " + what + " while capturing a graph, which a graph cannot hold");
}

void SimDevice::synchronize() {
  refuseWhileCapturing("a wait for the stream");
  countHostWait();
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_) {
    std::string error = *error_;
    error_.reset();
    throw Error(name() + ": asynchronous error in " + error);
  }
}

std::shared_ptr<std::byte> SimDevice::allocate(size_t bytes) {
  size_t rounded = (bytes + 255) / 256 * 256;
  void* memory = std::aligned_alloc(256, rounded ? rounded : 256);
  if (!memory)
    throw Error(name() + ": out of simulated device memory allocating " + formatBytes(bytes) + " (" +
                formatBytes(availableHostBytes()) + " of host memory available)");
  return {static_cast<std::byte*>(memory), [](std::byte* p) { std::free(p); }};
}

void SimDevice::copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) {
  refuseWhileCapturing("a copy from host memory");
  countToDevice(bytes);
  if (bytes == 0) return;  // nothing to stage (an empty buffer may have no address)
  // Like cudaMemcpyAsync from pageable memory: the source is staged before the call returns.
  auto staged = std::make_shared<std::vector<std::byte>>(src, src + bytes);
  enqueue("copy to " + name(), [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
}

void SimDevice::copyToHost(std::byte* dst, const std::byte* src, size_t bytes) {
  refuseWhileCapturing("a copy to host memory");
  countToHost(bytes);
  synchronize();
  copyBytes(dst, src, bytes);
}

void SimDevice::copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  enqueue("copy on " + name(), [dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

namespace {

// The stream thread reads the host's clock when it reaches each mark.
class SimClock final : public DeviceClock {
 public:
  explicit SimClock(SimDevice& device) : device_(device), times_(std::make_shared<std::vector<Time>>()) {}
  void mark() override {
    device_.enqueue("clock mark on " + device_.name(), [times = times_] { times->push_back(std::chrono::steady_clock::now()); });
  }
  std::vector<double> seconds() override {
    std::vector<double> out;
    for (const Time& t : *times_) out.push_back(std::chrono::duration<double>(t - times_->front()).count());
    return out;
  }

 private:
  using Time = std::chrono::steady_clock::time_point;
  SimDevice& device_;
  std::shared_ptr<std::vector<Time>> times_;
};

struct SimGraph final : Graph {
  std::vector<std::pair<std::string, std::function<void()>>> work;
  size_t launches() const override { return work.size(); }
};

}  // namespace

std::unique_ptr<DeviceClock> SimDevice::clock() { return std::make_unique<SimClock>(*this); }

void SimDevice::begin() {
  std::lock_guard lock(mutex_);
  if (capturer_) throw Error(name() + ": a graph is already being captured");
  capturer_ = std::this_thread::get_id();
  recorded_.clear();
}

int64_t SimDevice::queued() const {
  std::lock_guard lock(mutex_);
  return queued_;
}

size_t SimDevice::recorded() const {
  std::lock_guard lock(mutex_);
  return recorded_.size();
}

void SimDevice::refusePartialGraphs(bool refuse) {
  std::lock_guard lock(mutex_);
  refusePartial_ = refuse;
}

std::shared_ptr<const Graph> SimDevice::end(size_t keep) {
  std::lock_guard lock(mutex_);
  if (refusePartial_ && keep > 0 && keep < recorded_.size()) {
    recorded_.clear();
    capturer_.reset();
    throw CaptureBroken(name() + ": this graph cannot drop its last items");
  }
  auto graph = std::make_shared<SimGraph>();
  recorded_.resize(std::min(keep, recorded_.size()));
  graph->work = std::move(recorded_);
  recorded_.clear();
  capturer_.reset();
  return graph;
}

void SimDevice::launch(const Graph& graph) {
  for (const auto& [what, work] : static_cast<const SimGraph&>(graph).work) enqueue(what, work);
}

}  // namespace spmd::runtime
