// The cpu backend's driver: "cpu" (one device) and "cpu:N" (N devices emulated by threads of
// this process, sharing the cores: each replica's thread gets an equal share of OpenMP threads).
#pragma once

#include <string>
#include <vector>

namespace spmd::runtime {

// How many CPU devices the host emulates: SPMD_CPU_DEVICE_COUNT, else 8 (as many as the
// SPMD tests use; any count works, the replicas then share the cores).
int emulatedCpuDeviceCount();
// OpenMP threads each of `replicas` emulated CPU devices gets (the cores are shared equally).
int cpuThreadsPerReplica(int replicas);
// The devices of "<backend>:N" (N emulated devices, at most emulatedCpuDeviceCount()), for the
// backends that emulate devices on the host (cpu, sim); `forms` goes into messages.
std::vector<int> parseEmulatedCount(const std::string& spec, const std::string& rest, bool hasColon,
                                    const std::string& forms);

}  // namespace spmd::runtime
