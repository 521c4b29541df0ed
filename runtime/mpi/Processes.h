// The processes of one job. Started by the engine's own launcher (`mpirun -np P prog ...`), every
// process runs the same program on its K local devices and the pmap axis spans all P*K replicas:
// global replica index = process rank * K + local index. Without mpirun there is one process and
// MPI is never initialised. Under mpirun (Open MPI's OMPI_COMM_WORLD_SIZE, or PMIx / PMI) MPI
// starts on the first call to processes(), with MPI_THREAD_MULTIPLE, and finalizes at exit.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device/Job.h"

namespace spmd::runtime {

struct Program;

// The job this process belongs to (one process unless launched by mpirun). Throws spmd::Error
// when launched by mpirun but this build has no MPI, or MPI cannot start.
const ProcessInfo& processes();
// The same job as an object to hand to a ReplicaGroup (runtime/device/Job.h).
const Job& processJob();
// The processes `program` spans: this job's for a program with a mapped axis, this process alone
// (Job::single()) for one without (jit's programs).
const Job& jobOf(const Program& program);

// How an all-reduce across processes combines the replicas (SPMD_REDUCE, default exact):
// Exact folds every element over all P*K replicas with the fold tree over the global replica
// index (runtime/device/Fold.h), so any split of the same replicas into processes and threads
// gives the same bits (one process on cpu:4, 2x2, 4x1);
// Fast sums within each process first, then calls MPI_Allreduce: repeatable only for one layout
// (and one Open MPI algorithm choice, which depends on the message size).
enum class ReduceMode { Exact, Fast };
ReduceMode reduceModeFromEnvironment();
const char* reduceModeName(ReduceMode mode);

// Host-side collectives over the processes, for programs around the steps (a checkpoint's
// barriers, summing metrics). Every process must call them in the same order; they run on the
// communication thread and fail the job (see abortJob) past SPMD_COLLECTIVE_TIMEOUT. With one
// process they return at once.
void processBarrier(const std::string& what);
// Element-wise sum of `values` over the processes, in process order (the same bits everywhere).
void processSum(std::vector<double>& values, const std::string& what);
// Every process's `value`, in process order.
std::vector<int64_t> processAllGather(int64_t value, const std::string& what);
// Every process's `text` (any length, any bytes), in process order.
std::vector<std::string> processAllGatherText(const std::string& text, const std::string& what);
// Process 0's `bytes` on every process (same size everywhere), e.g. NCCL's unique id.
void processBroadcast(std::vector<std::byte>& bytes, const std::string& what);

// The communicators of `localReplicas` replicas of this process in a job of several processes:
// ranks processes().rank * localReplicas + 0..localReplicas-1 of processes().size * localReplicas
// (runtime/mpi/ProcessCommunicator.cpp; throws in a build without MPI). Reduction mode from
// SPMD_REDUCE; SPMD_OVERLAP=0 turns off running all-reduces behind the following steps. Each
// replica stands for `leavesPerReplica` leaves of the fold tree (its accumulation steps, whose
// subtree it has already reduced; a power of two).
std::vector<std::unique_ptr<Communicator>> makeProcessCommunicators(int localReplicas,
                                                                    std::chrono::milliseconds timeout,
                                                                    int leavesPerReplica = 1);

// Ends the whole job: prints "spmd: <process>: <message>" to stderr, then MPI_Abort (exit code
// `code` from mpirun). With one process, prints and calls std::exit(code).
[[noreturn]] void abortJob(const std::string& message, int code = 1);

}  // namespace spmd::runtime
