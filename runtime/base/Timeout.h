// How long a collective may wait for the other replicas (and processes) before the run fails:
// SPMD_COLLECTIVE_TIMEOUT seconds, default 300. One definition for pmap, spmd-run and the
// communication thread of a job of several processes.
#pragma once

#include <chrono>

namespace spmd::runtime {

// `seconds` when positive, else SPMD_COLLECTIVE_TIMEOUT, else 300 s; throws spmd::Error when the
// variable is not a positive number.
std::chrono::milliseconds collectiveTimeoutFromEnvironment(double seconds = 0);

}  // namespace spmd::runtime
