// The input pipeline for any Dataset (data/Dataset.h): a seeded shuffle per epoch, batches of a
// fixed global size (the last incomplete batch of an epoch is dropped, so every step has the
// same shape and compiles once) assembled by a prefetch thread while the previous step runs, and
// in a job of several processes only the rows of this process's replicas (BatchRows).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "frontend/data/Dataset.h"

namespace spmd::data {

// A permutation of [0, n) determined by (seed, epoch) alone: Fisher-Yates over std::mt19937_64,
// whose output the C++ standard fixes, so every run and machine sees the same order.
std::vector<int64_t> epochOrder(int64_t n, uint64_t seed, int64_t epoch);

struct Batch {
  std::vector<Array> columns;  // the Dataset's columns, [rows, ...] each (rows: the whole batch by default)
  int64_t index = 0;           // position within the epoch
  const Array& images() const { return columns.at(0); }  // image-classification sets
  const Array& labels() const { return columns.at(1); }
};

// Rows [begin, end) of each global batch (end -1: to its end). A process of a job of several
// reads only its replicas' rows: those of global replicas rank * K .. rank * K + K - 1, each
// batch / (P * K) rows (see rowsOfProcess).
struct BatchRows {
  int64_t begin = 0, end = -1;
};

// The rows of each global batch of `batch` rows that process `rank` of `processes`, with
// `localReplicas` replicas each, reads (the batch splits evenly over the global replicas; throws
// saying so when it does not).
BatchRows rowsOfProcess(int64_t batch, int rank, int processes, int localReplicas);

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
