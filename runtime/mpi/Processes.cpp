// Processes: is this a job of several processes, and the host-side collectives between them.
#include "runtime/mpi/Processes.h"

#include <variant>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cstring>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"
#include "runtime/device/Communicator.h"
#include "runtime/program/Program.h"
#include "runtime/base/Timeout.h"
#include "runtime/base/Timeline.h"
#if SPMD_WITH_MPI
#include "runtime/mpi/MpiEngine.h"
#endif

namespace spmd::runtime {
namespace {

// The process count a launcher announces in the environment (Open MPI, PMIx, PMI), else 1.
int launchedSize(std::string* variable) {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    if (std::optional<int64_t> size = envWhole(name, 1, 1 << 24)) {
      *variable = std::string(name) + "=" + std::to_string(*size);
      return int(*size);
    }
  }
  return 1;
}

ProcessInfo start() {
  ProcessInfo info;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  info.host = host;
  std::string variable;
  if (launchedSize(&variable) <= 1) return info;
#if SPMD_WITH_MPI
  startMpiJob(info);
  return info;
#else
  throw Error("this process was launched as one of several (" + variable +
              ") but this build of spmd has no MPI support (libopenmpi-dev was not found when "
              "configuring); install it (scripts/setup.sh) and rebuild, or run without mpirun");
#endif
}

bool started = false;

}  // namespace

#if !SPMD_WITH_MPI
std::vector<std::unique_ptr<Communicator>> makeProcessCommunicators(int, std::chrono::milliseconds, int) {
  throw Error("this build of spmd has no MPI support; a job of several processes needs it");
}
#endif

const ProcessInfo& processes() {
  // Started once: a failed start is kept and thrown again by every later call (MPI may not be
  // initialized twice, and a second try would end in Open MPI's own message instead of ours).
  static const std::variant<ProcessInfo, std::string> state = []() -> std::variant<ProcessInfo, std::string> {
    try {
      ProcessInfo i = start();
      started = i.size > 1;
      timeline::setProcess(i.rank, i.size);  // the trace's pid and, with several processes, its file name
      return i;
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  }();
  if (const std::string* failed = std::get_if<std::string>(&state)) throw Error(*failed);
  return std::get<ProcessInfo>(state);
}

namespace {

// The job of this launch, through the functions above.
class ProcessJob final : public Job {
 public:
  const ProcessInfo& info() const override { return processes(); }
  std::vector<std::unique_ptr<Communicator>> communicators(int localReplicas, std::chrono::milliseconds timeout,
                                                           int leavesPerReplica) const override {
    return makeProcessCommunicators(localReplicas, timeout, leavesPerReplica);
  }
  void broadcast(std::vector<std::byte>& bytes, const std::string& what) const override { processBroadcast(bytes, what); }
  std::vector<int64_t> allGather(int64_t value, const std::string& what) const override {
    return processAllGather(value, what);
  }
  std::vector<std::string> allGatherText(const std::string& text, const std::string& what) const override {
    return processAllGatherText(text, what);
  }
};

}  // namespace

const Job& processJob() {
  static const ProcessJob job;
  return job;
}

const Job& jobOf(const Program& program) { return program.axisName.empty() ? Job::single() : processJob(); }

ReduceMode reduceModeFromEnvironment() {
  const char* value = std::getenv("SPMD_REDUCE");
  if (!value || !*value || std::strcmp(value, "exact") == 0) return ReduceMode::Exact;
  if (std::strcmp(value, "fast") == 0) return ReduceMode::Fast;
  throw Error("SPMD_REDUCE='" + std::string(value) +
              "' is not a reduction mode; use exact (the default: the same bits for any split of the "
              "replicas into processes) or fast (MPI_Allreduce of per-process sums)");
}

const char* reduceModeName(ReduceMode mode) { return mode == ReduceMode::Exact ? "exact" : "fast"; }

void processBarrier(const std::string& what) {
  if (processes().size == 1) return;
#if SPMD_WITH_MPI
  MpiEngine& engine = MpiEngine::instance();
  engine.run([&] { checkMpi(MPI_Barrier(engine.comm()), "MPI_Barrier", what); }, "barrier: " + what,
             collectiveTimeoutFromEnvironment());
#endif
}

void processSum(std::vector<double>& values, const std::string& what) {
  if (processes().size == 1) return;
#if SPMD_WITH_MPI
  MpiEngine& engine = MpiEngine::instance();
  const int n = static_cast<int>(values.size()), size = processes().size;
  std::vector<double> all(size_t(n) * size);
  engine.run(
      [&] {
        checkMpi(MPI_Allgather(values.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, engine.comm()),
                 "MPI_Allgather", what);
      },
      "sum over processes: " + what, collectiveTimeoutFromEnvironment());
  for (int i = 0; i < n; ++i) {
    double sum = all[i];
    for (int p = 1; p < size; ++p) sum += all[size_t(p) * n + i];
    values[i] = sum;
  }
#endif
}

std::vector<int64_t> processAllGather(int64_t value, const std::string& what) {
  if (processes().size == 1) return {value};
  std::vector<int64_t> all(processes().size);
#if SPMD_WITH_MPI
  MpiEngine& engine = MpiEngine::instance();
  engine.run(
      [&] {
        checkMpi(MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, engine.comm()),
                 "MPI_Allgather", what);
      },
      "gather over processes: " + what, collectiveTimeoutFromEnvironment());
#endif
  return all;
}

std::vector<std::string> processAllGatherText(const std::string& text, const std::string& what) {
  if (processes().size == 1) return {text};
  std::vector<int64_t> lengths = processAllGather(int64_t(text.size()), what + " (lengths)");
  std::vector<std::string> all(lengths.size());
#if SPMD_WITH_MPI
  std::vector<int> counts(lengths.size()), offsets(lengths.size());
  int64_t total = 0;
  for (size_t p = 0; p < lengths.size(); ++p) {
    if (lengths[p] > INT_MAX || total + lengths[p] > INT_MAX)
      throw Error(what + ": " + std::to_string(total + lengths[p]) + " bytes to gather exceed MPI's int count");
    counts[p] = int(lengths[p]), offsets[p] = int(total), total += lengths[p];
  }
  std::string gathered(size_t(total), '\0');
  MpiEngine& engine = MpiEngine::instance();
  engine.run(
      [&] {
        checkMpi(MPI_Allgatherv(text.data(), int(text.size()), MPI_BYTE, gathered.data(), counts.data(), offsets.data(),
                                MPI_BYTE, engine.comm()),
                 "MPI_Allgatherv", what);
      },
      "gather over processes: " + what, collectiveTimeoutFromEnvironment());
  for (size_t p = 0; p < lengths.size(); ++p) all[p] = gathered.substr(size_t(offsets[p]), size_t(counts[p]));
#endif
  return all;
}

void processBroadcast(std::vector<std::byte>& bytes, const std::string& what) {
  if (processes().size == 1) return;
#if SPMD_WITH_MPI
  MpiEngine& engine = MpiEngine::instance();
  engine.run(
      [&] {
        checkMpi(MPI_Bcast(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, engine.comm()), "MPI_Bcast", what);
      },
      "broadcast from process 0: " + what, collectiveTimeoutFromEnvironment());
#endif
}

void abortJob(const std::string& message, int code) {
  std::string who = started ? processes().describe() : "";
  std::fprintf(stderr, "spmd: %s%s%s; ending the job\n", who.c_str(), who.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
#if SPMD_WITH_MPI
  if (started) {
    // Give the launcher's output forwarding a moment to deliver the message before MPI_Abort
    // tears the job down (a stopped or killed peer makes that teardown fast); after it comes
    // only Open MPI's own notice that the job was aborted.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    MPI_Abort(MPI_COMM_WORLD, code);
  }
#endif
  std::_Exit(code);
}

}  // namespace spmd::runtime
