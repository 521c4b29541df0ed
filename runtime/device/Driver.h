// A backend as the runtime sees it (IREE's HAL driver): it reads its part of a device list,
// makes the devices (each with its allocator and kernel table), prepares the thread a replica
// runs on, and joins the replicas with communicators. Backends register by name; the generic
// runtime (DeviceList, ReplicaGroup, Executor) reaches them only through this interface.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/device/Communicator.h"
#include "runtime/device/Device.h"
#include "runtime/device/Job.h"

namespace spmd::runtime {

// Host threads per replica: how many, whether the user chose the number (an option or
// SPMD_THREADS_PER_REPLICA) rather than the default share, and how it was reached.
struct ThreadShare {
  int threads = 0;
  bool chosen = false;
  std::string why;
  // > 0: at most this many of the process's replicas run at once, taking turns on the cores
  // (runtime/device/CoreTurns.h); 0: all at once.
  int turns = 0;
  // Gradient accumulation's micro-batches one replica can run at once, each on `threads`, beside
  // every other replica's, without taking turns: a micro-batch's bits depend on its threads, not
  // on how many run together (runtime::callAccumulated runs them in rounds of this many).
  int microAtOnce = 1;
};

// How a backend runs the ops with bf16 kernels (runtime/program/Bf16Kernels.h): `native`, its
// library's bf16 kernels (the compiler then keeps those ops in bf16), else its f32 kernels between
// bf16 roundings; `path` says which, and why, in words.
struct Bf16Kernels {
  bool native = false;
  std::string path = "emulated: the f32 kernels between bf16 roundings";
};

struct DeviceList;
struct Program;

class Driver {
 public:
  virtual ~Driver() = default;
  // The backend's name, the part of a device list before ':' ("cpu", "sim", "cuda").
  virtual std::string name() const = 0;
  // The device-list forms it accepts, for messages ("cpu, cpu:N (N emulated devices)").
  virtual std::string forms() const = 0;
  // One device index per replica for `spec` ("cuda:0*2"), `rest` being the text after ':'
  // (`hasColon` false for the bare name). Throws spmd::Error saying what is wrong and what is
  // valid; a backend that needs hardware says why it is missing.
  virtual std::vector<int> parse(const std::string& spec, const std::string& rest, bool hasColon) const = 0;
  // How many devices of this backend can be used; 0 with `why` saying why (no GPU, no driver).
  virtual int available(std::string* why) const = 0;
  // The device replica `replica` of `list` runs on.
  virtual std::shared_ptr<Device> makeDevice(const DeviceList& list, int replica) const = 0;
  // The kernel table its devices run (Device::kernels), by op, with what serves each op; needs
  // no device (`spmd-run --kernels` prints it).
  virtual const KernelTable& kernels() const = 0;
  // The activation layout its devices' kernels prefer (runtime/program/Layouts.h: "nChw8c" or
  // "nChw16c", "nhwc"; Device::readsLayout holds for it), for the compiler's
  // spmd-assign-layouts; "": plain only.
  virtual std::string activationLayout() const { return ""; }
  // Whether its devices run bf16 convolutions and matmuls natively (the compiler's
  // spmd-widen-bf16 native-kernels option), asked once per compilation.
  virtual Bf16Kernels bf16Kernels() const { return {}; }
  // The host threads each replica of `list` runs its kernels with, when they change its results
  // (the cpu backend's OpenMP threads: oneDNN rounds differently per thread count); `requested`
  // > 0 asks for that many; `job`: the processes sharing the host's cores; `microBatches`: the
  // virtual replicas each replica runs in turn (accumulation), counted as replicas so that every
  // layout of one replica count gets the same threads; `atOnce`: how many of those run together
  // (0: as many as the share holds, ThreadShare::microAtOnce), which backends whose results do
  // not depend on the threads may share them among. threads 0: the backend's results do not
  // depend on host threads.
  virtual ThreadShare threadsPerReplica(const DeviceList& list, int requested, const ProcessInfo& job,
                                        int microBatches = 1, int atOnce = 0) const {
    return {};
  }
  // Whether `program`'s results may depend on the host threads its replicas run with (the cpu
  // backend: a step whose kernel may be oneDNN's own threading of a convolution, matmul or
  // batch norm, or a user's kernel), so that it must run the threads of the replica count it
  // stands for; false: any share gives the same bits (gradient accumulation's update after the
  // micro-batches then takes the device's whole share).
  virtual bool threadsChangeBits(const Program& program) const { return false; }
  // Runs on the worker thread of replica `replica` of `list` before its first step, with
  // threadsPerReplica's answer (the cpu backend sets the thread's OpenMP threads). Not called
  // when one replica runs on the caller's thread.
  virtual void prepareReplicaThread(const DeviceList& list, int replica, int threads) const {}
  // The communicators joining the replicas of `list`, one per local rank, in `job`. Default:
  // threads of this process exchanging pointers (InProcessCommunicator), or, in a job of several
  // processes, the job's own communicators (host memory only: MPI).
  // Each replica stands for `leavesPerReplica` leaves of the fold tree (its accumulation steps).
  virtual std::vector<std::unique_ptr<Communicator>> makeCommunicators(
      const DeviceList& list, std::chrono::milliseconds timeout, const Job& job, int leavesPerReplica = 1) const;
};

// Makes `driver` reachable by its name. Called by each backend's register function
// (runtime/device/Registry.cpp lists those built in); a name registered twice is an error.
void registerDriver(std::unique_ptr<Driver> driver);
// The driver of `backend`; throws naming the backends this build has (and why an optional one
// is missing) when there is none. `spec` is the device list being read, for the message.
const Driver& driverFor(const std::string& backend, const std::string& spec);
// Names of the registered backends, in registration order.
std::vector<std::string> driverNames();
// Devices of `backend` this process can use; 0 with `why` set when the backend is not built or
// has no device (tests skip with that reason).
int availableDevices(const std::string& backend, std::string* why = nullptr);

}  // namespace spmd::runtime
