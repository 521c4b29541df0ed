// The job a replica group belongs to, handed to it explicitly: which process this is among how
// many, and how this process's replicas reach the others'. Job::single() is this process alone
// (jit's programs, tests, one-process runs); runtime/mpi makes the job of an mpirun launch
// (processJob()). The device layer sees only this interface, never MPI.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace spmd::runtime {

class Communicator;

struct ProcessInfo {
  int rank = 0;        // this process, 0..size-1
  int size = 1;        // processes in the job
  int localSize = 1;   // processes of the job on this host (they share its cores)
  std::string host;    // this host's name, for messages
  // "process 1 of 2 (host node3)"; "" for a single process.
  std::string describe() const;
};

class Job {
 public:
  virtual ~Job() = default;
  virtual const ProcessInfo& info() const = 0;
  // Host-memory communicators of `localReplicas` replicas of this process with every other
  // process's: ranks info().rank * localReplicas + 0..localReplicas-1 of info().size *
  // localReplicas, each standing for `leavesPerReplica` leaves of the fold tree. Only called when
  // info().size > 1.
  virtual std::vector<std::unique_ptr<Communicator>> communicators(int localReplicas, std::chrono::milliseconds timeout,
                                                                   int leavesPerReplica) const = 0;
  // Process 0's `bytes` on every process (same size everywhere), e.g. NCCL's unique id.
  virtual void broadcast(std::vector<std::byte>& bytes, const std::string& what) const = 0;
  // Every process's `value`, in process order.
  virtual std::vector<int64_t> allGather(int64_t value, const std::string& what) const = 0;
  // Every process's `text` (any length each), in process order.
  virtual std::vector<std::string> allGatherText(const std::string& text, const std::string& what) const = 0;

  // A job of this process alone.
  static const Job& single();
};

}  // namespace spmd::runtime
