// The input pipeline for any Dataset (data/Dataset.h): a seeded shuffle per epoch, batches of a
// fixed global size assembled by a prefetch thread while the previous step runs, every example
// of the epoch seen: a batch is dealt to the replicas' parts of one compiled shape and padded
// with masked rows where it does not fill them (an uneven split, an epoch's last batch), so
// every step compiles once; in a job of several processes only this process's parts
// (BatchLayout).
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
  // The Dataset's columns, [rows, ...] each: the assembled parts' rows, padding rows zero.
  std::vector<Array> columns;
  Array mask;                // f32 [rows]: 1 for an example, 0 for padding
  int64_t index = 0;         // position within the epoch
  int64_t examples = 0;      // examples in the whole global batch (every part, every process)
  int64_t parts = 1;         // parts of the global batch (BatchLayout::parts)
  const Array& images() const { return columns.at(0); }  // image-classification sets
  const Array& labels() const { return columns.at(1); }
  // The factor that makes sum(loss * mask) * lossScale() a part's loss whose mean over the parts
  // (the compiler's pmean) is the mean over the batch's examples: parts / examples.
  double lossScale() const { return double(parts) / double(examples); }
};

// How each global batch lands on the replicas. Its examples (`batch`, fewer in an epoch's last
// batch) are dealt in order to `parts` equal parts of `partRows` rows: the job's replicas, times
// the micro-batches of gradient accumulation. The first examples % parts parts take one example
// more than the others; a part's rows after its examples are padding (zeros, mask 0). A
// loader assembles parts [firstPart, lastPart): one process's replicas (layoutOfProcess).
struct BatchLayout {
  int64_t parts = 1;
  int64_t partRows = 0;                  // 0: ceil(batch / parts)
  int64_t firstPart = 0, lastPart = -1;  // -1: to the last part
  bool dropLast = false;                 // drop an epoch's last incomplete batch instead
};

// The layout of process `rank` of `processes`, each with `localParts` parts (its replicas x
// accumulate), for global batches of `batch` examples.
BatchLayout layoutOfProcess(int64_t batch, int rank, int processes, int64_t localParts);

class Prefetcher {
 public:
  // Batches first, first + 1, ... of `epoch` (each `batch` rows of epochOrder); `depth` batches
  // are kept ready ahead of the consumer.
  // `layout`: how a batch spreads over parts and which this loader assembles (BatchLayout).
  Prefetcher(const Dataset& data, int64_t batch, uint64_t seed, int64_t epoch, int64_t first = 0,
             int depth = 2, BatchLayout layout = {});
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Batches per epoch: every example once (the last batch may be short), or with dropLast the
  // full batches.
  int64_t batchesPerEpoch() const { return count_; }
  // Rows of each assembled batch: (lastPart - firstPart) * partRows.
  int64_t rows() const { return (layout_.lastPart - layout_.firstPart) * layout_.partRows; }
  // The next batch, or nothing at the end of the epoch.
  std::optional<Batch> next();
  // Seconds next() spent waiting for the prefetch thread (0 when data is never the bottleneck).
  double waitSeconds() const { return waited_; }

 private:
  void produce();
  Batch assemble(int64_t index) const;

  const Dataset& data_;
  const int64_t batch_, count_;
  BatchLayout layout_;
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
