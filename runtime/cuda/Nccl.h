// NCCL for cuda replicas (the data-parallel engine of PyTorch DDP and Horovod on GPUs): one NCCL
// rank per replica on distinct GPUs, in one process (cuda:0,1: replaces the pointer exchange,
// which needs peer access) or across processes (the unique id sent from process 0 with MPI).
// Replicas sharing one GPU (cuda:0*N) keep the pointer exchange: NCCL refuses two ranks on one
// device. Device data goes through NCCL on the replica's stream; host-side calls (barrier,
// host-memory collectives, abort) go to the communicator it wraps.
//
// Exact mode (SPMD_REDUCE=exact, the default): slices exchanged with grouped ncclSend/ncclRecv,
// folded on the device with the fold tree over the global ranks (runtime/device/Fold.h, as the
// pointer-exchange kernels and the CPU communicators do, so any layout gives the same bits),
// then sent back to every rank. Fast mode: ncclAllReduce (ring or tree; repeatable for one
// layout). A collective that does not finish within the collective timeout aborts the NCCL
// communicator and fails the replica, naming the collective; it never hangs.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device/Communicator.h"
#include "runtime/device/Job.h"

namespace spmd::runtime {

struct DeviceList;

// Whether this build has NCCL, and its version ("2.28.9"); "" and `why` when not.
std::string ncclVersion(std::string* why = nullptr);

// Whether the replicas of `list` in a job of `processes` processes use NCCL: the build has it,
// and there are several processes, or several replicas on distinct GPUs. `why` says which path
// is taken and why, for messages and tests.
bool useNccl(const DeviceList& list, int processes, std::string* why = nullptr);

// Wraps `host` (one communicator per local replica, ranks and size as the job's) with NCCL
// communicators on the GPUs of `list`; `job` sends process 0's NCCL id to the others.
// Collective: every replica of every process calls it.
std::vector<std::unique_ptr<Communicator>> makeNcclCommunicators(const DeviceList& list,
                                                                 std::vector<std::unique_ptr<Communicator>> host,
                                                                 const Job& job, std::chrono::milliseconds timeout);

}  // namespace spmd::runtime
