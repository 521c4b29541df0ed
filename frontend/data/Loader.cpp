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

BatchLayout layoutOfProcess(int64_t batch, int rank, int processes, int64_t localParts) {
  if (processes <= 0 || localParts <= 0 || rank < 0 || rank >= processes)
    throw Error("layoutOfProcess: process " + std::to_string(rank) + " of " + std::to_string(processes) +
                " with " + std::to_string(localParts) + " parts each is not a process of the job");
  if (batch <= 0) throw Error("batch size must be positive, got " + std::to_string(batch));
  const int64_t parts = int64_t(processes) * localParts;
  return {.parts = parts, .partRows = (batch + parts - 1) / parts, .firstPart = rank * localParts,
          .lastPart = (rank + 1) * localParts};
}

Prefetcher::Prefetcher(const Dataset& data, int64_t batch, uint64_t seed, int64_t epoch,
                       int64_t first, int depth, BatchLayout layout)
    : data_(data), batch_(batch),
      count_(batch <= 0 ? 0 : layout.dropLast ? data.size() / batch : (data.size() + batch - 1) / batch),
      layout_(layout), order_(epochOrder(data.size(), seed, epoch)), produced_(first), consumed_(first),
      depth_(std::max(1, depth)) {
  if (batch <= 0) throw Error("batch size must be positive, got " + std::to_string(batch));
  if (batch > data.size())
    throw Error("batch size " + std::to_string(batch) + " is larger than the data set (" +
                std::to_string(data.size()) + " examples); use a smaller batch or more data");
  if (layout_.parts <= 0) throw Error("a batch needs at least one part, got " + std::to_string(layout_.parts));
  if (layout_.partRows == 0) layout_.partRows = (batch + layout_.parts - 1) / layout_.parts;
  if (layout_.lastPart < 0) layout_.lastPart = layout_.parts;
  if (layout_.partRows * layout_.parts < batch)
    throw Error(std::to_string(layout_.parts) + " parts of " + std::to_string(layout_.partRows) +
                " rows cannot hold a batch of " + std::to_string(batch));
  if (layout_.firstPart < 0 || layout_.firstPart >= layout_.lastPart || layout_.lastPart > layout_.parts)
    throw Error("parts [" + std::to_string(layout_.firstPart) + ", " + std::to_string(layout_.lastPart) +
                ") are not parts of a batch in " + std::to_string(layout_.parts));
  if (first < 0 || first > count_)
    throw Error("cannot start at batch " + std::to_string(first) + " of an epoch with " +
                std::to_string(count_) + " batches");
  thread_ = std::thread([this] { produce(); });
}

// Batch `index`: its examples dealt to the parts (see BatchLayout), this loader's parts gathered
// and padded.
Batch Prefetcher::assemble(int64_t index) const {
  const int64_t start = index * batch_, examples = std::min(batch_, data_.size() - start);
  const int64_t parts = layout_.parts, each = examples / parts, extra = examples % parts;
  std::vector<int64_t> picked;     // dataset rows, in the order assembled
  std::vector<int64_t> positions;  // where each lands among this loader's rows
  for (int64_t p = layout_.firstPart; p < layout_.lastPart; ++p) {
    const int64_t first = p * each + std::min(p, extra), count = each + (p < extra ? 1 : 0);
    for (int64_t k = 0; k < count; ++k) {
      picked.push_back(order_[start + first + k]);
      positions.push_back((p - layout_.firstPart) * layout_.partRows + k);
    }
  }
  const int64_t total = rows();
  Batch b;
  b.index = index, b.examples = examples, b.parts = parts;
  b.mask = Array::zeros(DType::f32, {total});
  for (int64_t at : positions) b.mask.values<float>()[at] = 1.0f;
  Dataset gathered = gather(data_, picked);
  const bool dense = int64_t(picked.size()) == total;  // no padding: the gathered columns as they are
  for (const Array& column : gathered.columns) {
    if (dense) {
      b.columns.push_back(column);
      continue;
    }
    Shape shape = column.shape;
    shape[0] = total;
    Array padded = Array::zeros(column.dtype, shape);
    const size_t rowBytes = column.numel() ? column.bytes() / size_t(column.shape[0]) : 0;
    for (size_t k = 0; k < positions.size(); ++k)
      std::memcpy(padded.data() + size_t(positions[k]) * rowBytes,
                  column.data() + k * rowBytes, rowBytes);
    b.columns.push_back(std::move(padded));
  }
  return b;
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
    Batch b = assemble(index);
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
