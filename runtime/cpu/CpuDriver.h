// The cpu backend's driver: "cpu" (one device) and "cpu:N" (N devices emulated by threads of
// this process, sharing the cores: each replica's thread gets an equal share of OpenMP threads).
#pragma once

#include <string>
#include <vector>

#include "runtime/device/Driver.h"

namespace spmd::runtime {

// How many CPU devices the host emulates: SPMD_CPU_DEVICE_COUNT, else 8 (as many as the
// SPMD tests use; any count works, the replicas then share the cores).
int emulatedCpuDeviceCount();
// OpenMP threads each of this process's `replicas` emulated CPU devices runs its kernels with.
// oneDNN's results depend on it, so it is part of a run's layout: a run's bits are a function of
// the replica count and this number (on one kind of CPU). In order: `requested` when positive
// (PmapOptions::threadsPerReplica), SPMD_THREADS_PER_REPLICA, else the process's OpenMP threads
// (OMP_NUM_THREADS, or its cores) divided among its replicas; under mpirun without
// OMP_NUM_THREADS, the host's cores divided among the replicas of every process on this host
// (each process alone would see every core, oversubscribing them and changing the bits; `job`
// says how many share the host). `microBatches` (accumulation) count as replicas, except with
// thread-invariant kernels, where the `atOnce` that run together share the device's threads (0:
// as many as fit, ThreadShare::microAtOnce). At least 1; with how the number was reached.
ThreadShare cpuThreadShare(int replicas, int requested = 0, const ProcessInfo& job = {}, int microBatches = 1,
                           int atOnce = 0);
inline int cpuThreadsPerReplica(int replicas) { return cpuThreadShare(replicas).threads; }
// Whether a step of `program` runs a CPU kernel whose bits may depend on its OpenMP threads:
// a variant that is not thread-invariant (oneDNN's own threading of convolutions and matmuls,
// runtime/cpu/CpuVariants.h) or oneDNN's batch normalization, unless SPMD_THREAD_INVARIANT=1
// leaves those out, or a user's kernel (custom_call); every other kernel cuts its work by size
// alone (reductions, fused bodies, collectives).
bool cpuThreadsChangeBits(const Program& program);
// The devices of "<backend>:N" (N emulated devices, at most emulatedCpuDeviceCount()), for the
// backends that emulate devices on the host (cpu, sim); `forms` goes into messages.
std::vector<int> parseEmulatedCount(const std::string& spec, const std::string& rest, bool hasColon,
                                    const std::string& forms);

}  // namespace spmd::runtime
