// Checks that the replicas of a job hold what the SPMD promise needs them to hold. Before a
// compiled function first runs, its processes compare a fingerprint (the traced program, static
// arguments, argument types, threads per replica, reduction mode, and a checksum of every
// replicated input); a difference stops every process with one message naming the processes
// and what differs, instead of silently training P different models or failing later inside MPI.
// The drift check compares replicated state across every replica of every process (none of
// JAX, DDP or Horovod checks it): a mismatch names the tensor, the replicas and the first
// differing element.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frontend/Tensor.h"
#include "frontend/Tree.h"

namespace spmd {

// Named facts every process must share, in the same order on every process.
using Facts = std::vector<std::pair<std::string, std::string>>;

// Gathers every process's facts (a host collective: every process must call it) and throws
// spmd::Error when any differ: "<what>: the processes disagree: process 1 has static lr = 0.1,
// process 0 has 0.05". Every process sees the same gathered facts, so all of them throw.
// Returns at once in a job of one process.
void checkProcessesAgree(const Facts& facts, const std::string& what);

// CRC-32 of `bytes` as 8 hex digits.
std::string checksumText(const void* data, size_t bytes);

// The drift check: every replica (of every process) holds the same bits of each named
// replicated, device-resident tensor; values on the host have one copy and pass. Throws
// spmd::Error naming the tensor, the replicas that differ and the first differing element.
// In a job of several processes every process must call it with the same tensors.
void checkReplicasAgree(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& what);
// Every leaf of `tree`, named "<prefix><path>".
void checkReplicasAgree(const Tree& tree, const std::string& prefix, const std::string& what);

}  // namespace spmd
