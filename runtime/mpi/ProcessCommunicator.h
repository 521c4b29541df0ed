// Collectives of a job of several processes, layered as Horovod's: the K replica threads of a
// process hand their operands to a shared job; the last of them to arrive queues it on the
// process's communication thread (MpiEngine), the only thread that calls MPI; each replica then
// waits for the result and copies it out. Global replica index = process rank * K + local index.
//
// all-reduce, exact mode (default): the fold tree over the global replica index
// (runtime/device/Fold.h). Each process first reduces its K replicas to the maximal subtrees of
// its block (one root when K is a power of two), the elements are cut into P slices, a pairwise
// exchange (MPI_Sendrecv, P - 1 steps) gives process j slice j of every other process's roots,
// process j folds them into the tree's root, and MPI_Allgatherv returns every folded slice to
// everyone: per process the bytes MPI_Allreduce's reduce-scatter + all-gather would move. Fast
// mode: each process folds its K replicas, then MPI_Allreduce. all_gather: MPI_Allgather of each
// process's K blocks. Within replica groups (a mesh axis): each process sends each other process
// only its replicas' operands (a reduce_scatter's rows) that process's members need
// (runtime/mpi/GroupExchange.h, MPI_Isend / MPI_Irecv), and each replica folds its group's in the
// group's order over the tree of its size; a group within one process moves nothing.
//
// A replica that fails ends the job (abortJob): the other processes wait in MPI and cannot be
// told to stop otherwise. Built only with MPI.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/device/Communicator.h"
#include "runtime/mpi/Processes.h"

namespace spmd::runtime {

// Seconds since the process started: on the communication thread running all-reduces, and on
// replica threads waiting for their results (the difference ran behind other work).
struct CollectiveTimes {
  double engineSeconds = 0, waitSeconds = 0;
  int64_t allReduces = 0;
};
CollectiveTimes collectiveTimes();
void resetCollectiveTimes();

}  // namespace spmd::runtime
