// epochOrder and the prefetch thread.
#include "frontend/data/Loader.h"

#include "runtime/base/Timeline.h"

#include <chrono>
#include <cstring>
#include <random>

namespace spmd::data {

std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1);
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % static_cast<uint64_t>(i + 1)]);
  return order;
}

BatchRows rowsOfProcess(int64_t batch, int rank, int processes, int localReplicas) {
  const int64_t replicas = int64_t(processes) * localReplicas;
  if (replicas <= 0 || rank < 0 || rank >= processes)
    throw Error("rowsOfProcess: process " + std::to_string(rank) + " of " + std::to_string(processes) +
                " with " + std::to_string(localReplicas) + " replicas each is not a process of the job");
  if (batch % replicas != 0)
    throw Error("a global batch of " + std::to_string(batch) + " does not split over " + std::to_string(replicas) +
                " replicas; use a multiple of " + std::to_string(replicas));
  const int64_t per = batch / replicas * localReplicas;
  return {rank * per, (rank + 1) * per};
}

Prefetcher::Prefetcher(const Dataset& data, int64_t batch, uint64_t seed, int64_t epoch,
                       int64_t first, int depth, BatchRows rows)
    : data_(data), batch_(batch), count_(batch > 0 ? data.size() / batch : 0), rows_(rows),
      order_(epochOrder(data.size(), seed, epoch)), produced_(first), consumed_(first),
      depth_(std::max(1, depth)) {
  if (batch <= 0) throw Error("batch size must be positive, got " + std::to_string(batch));
  if (count_ == 0)
    throw Error("batch size " + std::to_string(batch) + " is larger than the data set (" +
                std::to_string(data.size()) + " examples); use a smaller batch or more data");
  if (first < 0 || first > count_)
    throw Error("cannot start at batch " + std::to_string(first) + " of an epoch with " +
                std::to_string(count_) + " batches");
  if (rows_.end < 0) rows_.end = batch;
  if (rows_.begin < 0 || rows_.begin >= rows_.end || rows_.end > batch)
    throw Error("rows [" + std::to_string(rows_.begin) + ", " + std::to_string(rows_.end) + ") are not a part of a batch of " +
                std::to_string(batch));
  thread_ = std::thread([this] { produce(); });
}

Prefetcher::~Prefetcher() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  thread_.join();
}

void Prefetcher::produce() {
  for (;;) {
    int64_t index;
    {
      std::unique_lock lock(mutex_);
      space_.wait(lock, [&] { return stop_ || static_cast<int>(queue_.size()) < depth_; });
      if (stop_ || produced_ >= count_) return;
      index = produced_++;
    }
    const auto first = order_.begin() + index * batch_;
    Batch b{gather(data_, std::vector<int64_t>(first + rows_.begin, first + rows_.end)).columns, index};
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(b));
    }
    ready_.notify_one();
  }
}

std::optional<Batch> Prefetcher::next() {
  std::unique_lock lock(mutex_);
  if (consumed_ >= count_) return std::nullopt;
  auto start = std::chrono::steady_clock::now();
  ready_.wait(lock, [&] { return !queue_.empty(); });
  const auto end = std::chrono::steady_clock::now();
  waited_ += std::chrono::duration<double>(end - start).count();
  if (runtime::timeline::on() && end - start > std::chrono::microseconds(1))
    runtime::timeline::span(runtime::timeline::hostTrack(), "wait for data", "wait", start, end,
                            "batch " + std::to_string(consumed_ + 1));
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  ++consumed_;
  space_.notify_one();
  return b;
}

}  // namespace spmd::data
