// The input pipeline: a seeded shuffle per epoch, batches of a fixed global size (the last
// incomplete batch of an epoch is dropped, so every step has the same shape and compiles once),
// assembled by a prefetch thread while the previous step runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "frontend/data/FashionMnist.h"

namespace spmd::data {

// A permutation of [0, n) determined by (seed, epoch) alone: Fisher-Yates over std::mt19937_64,
// whose output the C++ standard fixes, so every run and machine sees the same order.
std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch);

struct Batch {
  Array images, labels;  // [rows, 1, 28, 28] f32, [rows] i32 (rows: the whole batch by default)
  int64_t index = 0;     // position within the epoch
};

// Rows [begin, end) of each global batch (end -1: to its end). A process of a job of several
// reads only its replicas' rows.
struct BatchRows {
  int64_t begin = 0, end = -1;
};

class Prefetcher {
 public:
  // Batches first, first + 1, ... of `epoch` (each `batch` rows of epochOrder); `depth` batches
  // are kept ready ahead of the consumer.
  // `rows`: the part of each global batch this loader assembles (see BatchRows).
  Prefetcher(const Dataset& data, int64_t batch, uint64_t seed, int64_t epoch, int64_t first = 0,
             int depth = 2, BatchRows rows = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Full batches per epoch (the remainder is dropped).
  int64_t batchesPerEpoch() const { return count_; }
  // The next batch, or nothing at the end of the epoch.
  std::optional<Batch> next();
  // Seconds next() spent waiting for the prefetch thread (0 when data is never the bottleneck).
  double waitSeconds() const { return waited_; }

 private:
  void produce();

  const Dataset& data_;
  const int64_t batch_, count_;
  BatchRows rows_;
  const std::vector<int64_t> order_;
  int64_t produced_, consumed_;
  const int depth_;
  std::mutex mutex_;
  std::condition_variable ready_, space_;
  std::deque<Batch> queue_;
  bool stop_ = false;
  double waited_ = 0;
  std::thread thread_;
};

}  // namespace spmd::data
