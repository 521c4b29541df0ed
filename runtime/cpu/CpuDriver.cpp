// The cpu driver: device lists cpu / cpu:N, CpuDevice, OpenMP threads per replica.
#include "runtime/cpu/CpuDriver.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>

#include "runtime/base/MachineLoad.h"
#include "runtime/base/Parse.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/OwnIsa.h"
#include "runtime/device/DeviceList.h"
#include "runtime/device/Driver.h"
#include "runtime/device/Variants.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

int emulatedCpuDeviceCount() {
  return int(envWhole("SPMD_CPU_DEVICE_COUNT", 1, 4096).value_or(8));
}

namespace {

// More replicas than the process's OpenMP threads hold at `share` threads each take turns (at
// most threads / share at once) unless SPMD_REPLICA_TURNS=0: cpu:4 on 2 cores, one thread each,
// ran the width-16 ResNet-18 pmap step in min 58.1 against 65.9 ms time-sliced (AMD Zen 4, 5
// interleaved runs). Across processes each process shares its own cores.
ThreadShare withTurns(ThreadShare share, int replicas, const ProcessInfo& job) {
  const int threads = omp_get_max_threads();
  const int turns = std::max(1, threads / share.threads);
  if (job.size > 1 || turns >= replicas || !envSwitch("SPMD_REPLICA_TURNS").value_or(true)) return share;
  share.turns = turns;
  share.why += "; " + std::to_string(share.turns) + " of the " + std::to_string(replicas) +
               " replicas run at once, taking turns on the " + std::to_string(threads) + " threads";
  return share;
}

// Micro-batches the process's threads hold at once, each at `share` threads beside the other
// replicas' (cpu:1 x 4 on 2 cores: the micro-batches run on one thread each, two at a time):
// its OpenMP threads, or under mpirun without OMP_NUM_THREADS its part of the host's cores.
int microBatchesAtOnce(const ThreadShare& share, int replicas, int microBatches, const ProcessInfo& job) {
  if (microBatches <= 1 || share.turns > 0) return 1;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int threads = job.size > 1 && !(omp && *omp)
                          ? onlineCores() / std::max(1, job.localSize)
                          : omp_get_max_threads();
  return std::clamp(threads / (std::max(1, replicas) * std::max(1, share.threads)), 1, microBatches);
}

// The threads of one replica running `counted` micro-batches' share at once, and how they were
// reached; `note` describes the micro-batches.
ThreadShare cpuShare(int replicas, int requested, const ProcessInfo& job, int counted, const std::string& note) {
  const int devices = std::max(1, replicas);
  replicas = devices * std::max(1, counted);
  if (requested > 0) return withTurns({requested, true, "set in PmapOptions::threadsPerReplica"}, devices, job);
  // The OpenMP threads each replica's kernels use; unset, the cores are shared among the replicas.
  if (std::optional<int64_t> n = envWhole("SPMD_THREADS_PER_REPLICA", 1, 4096))
    return withTurns({int(*n), true, "SPMD_THREADS_PER_REPLICA"}, devices, job);
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (job.size > 1 && !(omp && *omp)) {
    const long cores = onlineCores();
    int all = replicas * std::max(1, job.localSize);
    return {std::max(1, int(cores / all)), false,
            std::to_string(cores) + " cores of host " + job.host + " / " + std::to_string(all) + " replicas on it (" +
                std::to_string(job.localSize) + " processes x " + std::to_string(replicas) + note + ")"};
  }
  int threads = omp_get_max_threads();
  return withTurns({std::max(1, threads / replicas), false,
                    std::to_string(threads) + " OpenMP threads of this process / " + std::to_string(replicas) +
                        " replicas" + note},
                   devices, job);
}

}  // namespace

ThreadShare cpuThreadShare(int replicas, int requested, const ProcessInfo& job, int microBatches, int atOnce) {
  microBatches = std::max(1, microBatches);
  const std::string micro = " (" + std::to_string(std::max(1, replicas)) + " x " + std::to_string(microBatches) +
                            " micro-batches)";
  // Micro-batches count as replicas: cpu:1 with 4 micro-batches gets cpu:4's share, so every
  // layout of N virtual replicas runs the same threads (and gives the same bits).
  ThreadShare share = cpuShare(replicas, requested, job, microBatches, microBatches > 1 ? micro : "");
  const int fit = microBatchesAtOnce(share, replicas, microBatches, job);
  if (microBatches > 1 && threadInvariantKernels()) {
    // Thread-invariant kernels' bits do not depend on the threads: the micro-batches that run
    // together share the device's threads (cpu:1 x 4 on 2 cores: two at once on one thread
    // each, or one at a time on both).
    const int together = std::clamp(atOnce > 0 ? atOnce : fit, 1, microBatches);
    share = cpuShare(replicas, requested, job, together,
                     together == 1 ? " (micro-batches one at a time with the device's share: SPMD_THREAD_INVARIANT=1)"
                                   : " (" + std::to_string(std::max(1, replicas)) + " x " + std::to_string(together) +
                                         " micro-batches at once: SPMD_THREAD_INVARIANT=1)");
    share.microAtOnce = together;
  } else {
    share.microAtOnce = fit;
  }
  if (share.microAtOnce > 1)
    share.why += "; " + std::to_string(share.microAtOnce) + " micro-batches of each replica run at once";
  return share;
}

bool cpuThreadsChangeBits(const Program& program) {
  const bool invariant = threadInvariantKernels();
  for (const Step& step : program.steps) {
    if (step.op == "custom_call") return true;
    if (invariant) continue;
    if (step.op == "batch_norm_train" || step.op == "batch_norm_infer") return true;
    for (const VariantSet* set : cpu::cpuVariantSets())
      if (step.op == set->op)
        for (const KernelVariant& v : set->variants)
          if (!v.threadInvariant) return true;
  }
  return false;
}

// Parses "N" of "<name>:N" as a count of emulated devices (shared with the sim backend).
std::vector<int> parseEmulatedCount(const std::string& spec, const std::string& rest, bool hasColon,
                                    const std::string& forms) {
  std::string backend = spec.substr(0, spec.find(':'));
  std::string kind = backend == "cpu" ? "CPU devices" : backend + " devices";
  if (hasColon && rest.empty())
    throw Error("device list '" + spec + "' is empty: give a device count after '" + backend + ":', e.g. " +
                backend + ":2");
  int count = hasColon ? wholeNumber(rest) : 1;
  if (count < 0) throw Error("device list '" + spec + "': '" + rest + "' is not a device number; valid forms: " + forms);
  if (count == 0) throw Error("device list '" + spec + "' is empty (0 devices): ask for at least one, e.g. " +
                              backend + ":1");
  int available = emulatedCpuDeviceCount();
  if (count > available)
    throw Error("device list '" + spec + "' asks for " + std::to_string(count) + " " + kind + " but " +
                std::to_string(available) + " exist; use at most " + backend + ":" +
                std::to_string(available) + " or set SPMD_CPU_DEVICE_COUNT=" + std::to_string(count) +
                " to emulate more");
  std::vector<int> devices;
  for (int i = 0; i < count; ++i) devices.push_back(i);
  return devices;
}

namespace {

class CpuDriver final : public Driver {
 public:
  std::string name() const override { return "cpu"; }
  std::string forms() const override { return "cpu, cpu:N (N emulated devices)"; }
  std::vector<int> parse(const std::string& spec, const std::string& rest, bool hasColon) const override {
    return parseEmulatedCount(spec, rest, hasColon, forms());
  }
  int available(std::string*) const override { return emulatedCpuDeviceCount(); }
  std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) const override {
    cpu::ownIsa();  // a junk SPMD_MAX_CPU_ISA stops the run here, before its first step
    return std::make_shared<CpuDevice>(list.devices.at(replica));
  }
  const KernelTable& kernels() const override { return cpuKernels(); }
  std::string activationLayout() const override {
    const int64_t block = CpuDevice(0).channelBlock();
    return block ? "nChw" + std::to_string(block) + "c" : "";
  }
  Bf16Kernels bf16Kernels() const override { return {cpu::onednnBf16(), cpu::onednnBf16Path()}; }
  ThreadShare threadsPerReplica(const DeviceList& list, int requested, const ProcessInfo& job, int microBatches,
                                int atOnce) const override {
    return cpuThreadShare(list.size(), requested, job, microBatches, atOnce);
  }
  bool threadsChangeBits(const Program& program) const override { return cpuThreadsChangeBits(program); }
  void prepareReplicaThread(const DeviceList&, int, int threads) const override {
    // The replicas share the cores: each gets its part of the OpenMP threads oneDNN uses.
    omp_set_num_threads(threads);
  }
};

}  // namespace

void registerDriver_cpu() { registerDriver(std::make_unique<CpuDriver>()); }

}  // namespace spmd::runtime
