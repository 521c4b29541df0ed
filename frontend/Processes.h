// A job of several processes (`mpirun -np P prog --devices cpu:K`): which process this is, and
// the host-side collectives a training loop needs around its steps. A pmap's axis spans all
// P*K devices; each process passes the rows of its own devices (see README, "Several
// processes"). Without mpirun: process 0 of 1, and every call here returns at once.
#pragma once

#include "runtime/mpi/Processes.h"

namespace spmd {

inline int processIndex() { return runtime::processes().rank; }
inline int processCount() { return runtime::processes().size; }
using runtime::abortJob;
using runtime::processAllGather;
using runtime::processBarrier;
using runtime::processSum;

}  // namespace spmd
