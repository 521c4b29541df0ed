// Collectives across the replicas of one SPMD program. Each replica holds its own Communicator
// (its rank in the group); every replica must call the same collectives in the same order, which
// the compiler guarantees by giving all replicas one Program. Implementations: in-process threads
// (InProcessCommunicator, for replicas that are threads of one process) and, in a job of several
// processes, ProcessCommunicator (runtime/mpi: threads within a process, MPI between them).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/DType.h"
#include "runtime/program/Catalog.h"

namespace spmd::runtime {

// Thrown on a replica that stopped because another replica failed or a collective timed out;
// the group reports the original error, not these.
class ReplicaAborted : public Error {
 public:
  using Error::Error;
};

// Collectives a device library runs on a device's stream (NCCL for cuda replicas on distinct
// GPUs, within a process or across processes). A backend's collective kernels use them, when
// their communicator offers them, instead of exchanging device pointers.
class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // In place on device memory, ordered on `stream` (the backend's native stream handle);
  // returns when the result is in `data`. Exact or fast as the job's reduction mode says.
  virtual void allReduce(void* data, DType dtype, int64_t count, Reduction op, void* stream,
                         const std::string& what) = 0;
  // out[r * bytes .. (r + 1) * bytes) = rank r's `in`, device memory on `stream`.
  virtual void allGather(const void* in, void* out, size_t bytes, void* stream, const std::string& what) = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every replica's `count` elements of `data` become their reduction over replicas.
  // The result is the same bits on every replica and from run to run (fixed reduction order).
  // `what` names the calling op for errors ("all_reduce at model.cpp:12").
  virtual void allReduce(void* data, DType dtype, int64_t count, Reduction op,
                         const std::string& what) = 0;
  // out[r * bytes .. (r + 1) * bytes) = replica r's `in` (stacked in rank order).
  virtual void allGather(const void* in, void* out, size_t bytes, const std::string& what) = 0;
  // Overlap (DDP's bucketed all-reduce behind the backward pass): a communicator that runs
  // collectives on a thread of its own says so here; allReduceStart then copies the operands
  // out and returns at once, and allReduceFinish waits and writes the result. The default runs
  // the whole all-reduce in allReduceStart.
  struct Segment {
    void* data;
    int64_t count;  // elements of the collective's dtype
  };
  virtual bool overlaps() const { return false; }
  virtual std::shared_ptr<void> allReduceStart(std::span<const Segment> in, DType dtype, Reduction op,
                                               const std::string& what) {
    throw Error(what + ": this communicator has no background all-reduce");
  }
  virtual void allReduceFinish(const std::shared_ptr<void>& pending, std::span<const Segment> out) {}
  // For backends whose collectives run as device kernels over every replica's memory (CUDA
  // replicas in one process): publishes `mine`, waits for all ranks, returns every rank's
  // pointer in rank order. Throws when this communicator cannot share pointers.
  virtual std::vector<const void*> exchange(const void* mine, const std::string& what) {
    throw Error(what + ": this communicator cannot exchange device pointers");
  }
  // Device-side collectives when this communicator has them (nullptr: use exchange()).
  virtual DeviceCollectives* deviceCollectives() { return nullptr; }
  // Waits until every rank has arrived.
  virtual void barrier(const std::string& what) {
    throw Error(what + ": this communicator has no barrier");
  }
  // Marks the group failed with this replica's error: every replica waiting in (or later
  // entering) a collective throws ReplicaAborted instead of waiting.
  virtual void abort(const std::string& error) = 0;
  // Clears a previous abort before the next run; only called while no rank is in a collective.
  virtual void reset() {}
  // The replica index the program's axis_index sees: rank() unless the replica runs virtual
  // replicas one after another (gradient accumulation: virtual replica rank * steps + step).
  int virtualRank() const { return rank() * virtualSteps_ + virtualStep_; }
  void setVirtualStep(int step, int steps) { virtualStep_ = step, virtualSteps_ = steps; }

 private:
  int virtualStep_ = 0, virtualSteps_ = 1;
};

}  // namespace spmd::runtime
