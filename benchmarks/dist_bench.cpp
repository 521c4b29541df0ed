// The multi-process benchmark program, run by benchmarks/compare_processes.py (alone, or under
// mpirun). Three modes:
//   step       --devices cpu:K --width W --batch B --steps N: the sample's ResNet-18 train step
//              at global batch B (each process passes its rows), donated state as in the sample;
//              prints the median step time and, across processes, how much of the all-reduce
//              time of the communication thread the replicas did not wait for (hidden behind
//              the backward pass), and the memory: the replicas' planned arenas and the peak
//              resident set of the processes (both summed over processes); --shard-update runs
//              it with ZeRO-1 and reports the optimizer state one replica holds.
//   allreduce  --max-bytes M --repeats R: one replica per process; for 4 KB .. M, the time of an
//              f32 sum all-reduce in exact and fast mode (the runtime's communicator) and of a
//              plain MPI_Allreduce in this binary, with the bus bandwidth 2(P-1)/P x bytes / time.
//   grouped    --local K --max-bytes M --repeats R: K replicas per process; for 4 KB .. M per
//              replica, an f32 sum all-reduce within replica groups, as a mesh {data: P, model: K}
//              reduces over each axis: "model" (groups within a process) and "data" (groups across
//              the processes), a ppermute around a ring of every replica, an all_to_all, and an
//              all_to_all within the "data" groups, through the communicator's own paths (only
//              what another process's replicas read crosses) and through the defaults they
//              replaced (every replica's operand all-gathered, then the rows wanted folded or
//              copied; for the all_to_all within groups the groups' all_gather, of which it was
//              built), in this binary.
// Lines starting "result " are what the script reads.
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "TrainStep.h"
#include "tools/cli/Cli.h"
#include "frontend/spmd.h"
#include "runtime/base/Timeout.h"
#include "runtime/device/Communicator.h"
#include "runtime/device/DeviceList.h"
#include "runtime/exec/DeviceArray.h"
#include "runtime/program/MemoryPlan.h"
#include "runtime/mpi/MpiEngine.h"
#include "runtime/mpi/ProcessCommunicator.h"
#include "frontend/models/ResNet.h"

using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct StepFlags {
  std::string devices = "cpu:1";
  int64_t width = 64, batch = 64;
  int steps = 5, accumulate = 1, microAtOnce = 0;
  bool shardUpdate = false, fsdp = false, remat = false, prefetch = false;
  double memoryBudgetMb = 0;
  double shardedBucketMb = (4 << 20) / 1e6;  // PmapOptions' default (4 MiB)
};

struct AllreduceFlags {
  int64_t maxBytes = 64 << 20;
  int repeats = 10;
  int local = 4;  // grouped mode's replicas per process
};

int step(const StepFlags& f) {
  const std::string& devices = f.devices;
  const int64_t width = f.width, batch = f.batch;
  const int steps = f.steps, accumulate = f.accumulate;
  const int processes = spmd::processCount(), me = spmd::processIndex();
  auto model = spmd::models::resnet18(
      {.inChannels = 1, .numClasses = 10, .width = width, .bnAxisName = "", .checkpointBlocks = f.remat});
  auto [params, state] = model->initialize(1);
  spmd::optim::Sgd sgd({.learningRate = 0.01, .momentum = 0.9, .weightDecay = 0});
  spmd::Tree opt = sgd.init(params);
  auto trainStep = spmd::pmap(bench::trainStep(*model, sgd),
                              {.inAxes = {spmd::replicated, spmd::replicated, spmd::replicated, spmd::split, spmd::split},
                               .devices = devices, .shardedBucketBytes = std::max<int64_t>(1, int64_t(f.shardedBucketMb * 1e6)),
                               .name = "train_step", .donateArguments = {0, 1, 2},
                               .accumulate = accumulate, .microBatchesAtOnce = f.microAtOnce, .shardUpdate = f.shardUpdate,
                               .fullyShard = f.fsdp, .prefetchGathers = f.prefetch, .memoryBudget = int64_t(f.memoryBudgetMb * 1e6)});
  auto [x, y] = bench::syntheticBatch(batch);
  int64_t begin = batch * me / processes, end = batch * (me + 1) / processes;
  spmd::Tensor myX = spmd::Array::view(x.array(), begin * x.array().bytes() / batch,
                                       {end - begin, 1, 28, 28});
  spmd::Tensor myY = spmd::Array::view(y.array(), begin * y.array().bytes() / batch, {end - begin});
  std::vector<double> times;
  for (int s = 0; s < steps + 1; ++s) {  // the first call compiles
    if (s == 1) spmd::runtime::resetCollectiveTimes();
    spmd::processBarrier("step start");
    auto start = Clock::now();
    auto [p2, o2, s2, loss] = trainStep(params, opt, state, myX, myY);
    (void)loss.array();  // the step is done when its loss is on the host
    params = p2, opt = o2, state = s2;
    if (s > 0) times.push_back(since(start));
  }
  // The drift check of the whole replicated state (parameters, momentum, BN statistics).
  std::vector<double> checks;
  for (int c = 0; c < 3; ++c) {
    auto start = Clock::now();
    spmd::checkReplicasAgree(params, "params.", "drift check");
    spmd::checkReplicasAgree(opt, "opt.", "drift check");
    spmd::checkReplicasAgree(state, "state.", "drift check");
    checks.push_back(since(start));
  }
  // Optimizer state one replica holds: the whole tree, or with --shard-update its slices.
  double stateBytes = 0;
  for (const auto& [name, value] : opt) {
    const auto& resident = value.resident();
    const bool sliced = resident && resident->layout() == spmd::runtime::DeviceArray::Layout::Sliced;
    stateBytes += double(sliced ? spmd::numElements(resident->localShape()) : value.numel()) *
                  double(spmd::dtypeSize(value.dtype()));
  }
  auto t = spmd::runtime::collectiveTimes();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);  // ru_maxrss: KiB on Linux
  const double replicas = double(spmd::runtime::parseDeviceList(devices).size());
  // With accumulation the whole step is not planned (its two parts are): no arena of its own.
  const double arena = double(trainStep.lastProgram().arenaBytes) * replicas;
  // What the plan gives one replica during a step: the arena and every buffer outside it (the
  // inputs: parameters, or with --shard-update / --fsdp their slices, and the batch; with
  // --accumulate both parts and the gradients' fold).
  const double planned = double(trainStep.lastPlannedBytes()) * replicas;
  std::vector<double> sums{t.engineSeconds, t.waitSeconds, arena, double(usage.ru_maxrss) * 1024.0, planned,
                           replicas};
  spmd::processSum(sums, "collective times and memory");
  if (me == 0)
    std::printf("result step devices=%s processes=%d accumulate=%d batch=%lld width=%lld median_ms=%.2f "
                "allreduce_s=%.4f waited_s=%.4f hidden=%.3f drift_check_ms=%.2f arena_mb=%.1f rss_mb=%.1f "
                "shard_update=%d fsdp=%d remat=%d opt_state_mb_per_replica=%.3f planned_mb_per_replica=%.1f\n",
                devices.c_str(), processes, accumulate, static_cast<long long>(batch), static_cast<long long>(width),
                1e3 * median(times), sums[0], sums[1], sums[0] > 0 ? 1 - sums[1] / sums[0] : 0.0,
                1e3 * median(checks), sums[2] / 1e6, sums[3] / 1e6, int(f.shardUpdate), int(f.fsdp), int(f.remat), stateBytes / 1e6,
                sums[4] / sums[5] / 1e6);
  return 0;
}

int allreduce(const AllreduceFlags& f) {
  const int64_t maxBytes = f.maxBytes;
  const int repeats = f.repeats;
  const int processes = spmd::processCount(), me = spmd::processIndex();
  if (processes < 2) throw spmd::Error("allreduce mode needs mpirun -np 2 or more");
  using spmd::runtime::Communicator;
  auto timeout = spmd::runtime::collectiveTimeoutFromEnvironment();
  for (int64_t bytes = 4096; bytes <= maxBytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    std::vector<float> data(n);
    auto fill = [&] {
      for (int64_t i = 0; i < n; ++i) data[i] = float((i * 7 + me * 13) % 101) * 0.01f;
    };
    auto timeIt = [&](auto&& body) {
      std::vector<double> t;
      for (int r = 0; r < repeats + 1; ++r) {
        fill();
        spmd::processBarrier("allreduce timing");
        auto start = Clock::now();
        body();
        if (r > 0) t.push_back(since(start));
      }
      std::vector<double> worst{median(t)};
      spmd::processSum(worst, "timings");  // mean over processes
      return worst[0] / processes;
    };
    double plain = timeIt([&] {
      auto& engine = spmd::runtime::MpiEngine::instance();
      engine.run([&] { MPI_Allreduce(MPI_IN_PLACE, data.data(), int(n), MPI_FLOAT, MPI_SUM, engine.comm()); },
                 "MPI_Allreduce", timeout);
    });
    double modes[2];
    for (int m = 0; m < 2; ++m) {
      setenv("SPMD_REDUCE", m == 0 ? "exact" : "fast", 1);
      auto comms = spmd::runtime::makeProcessCommunicators(1, timeout);
      modes[m] = timeIt([&] { comms[0]->allReduceInPlace(data.data(), spmd::DType::f32, n, spmd::runtime::Reduction::Sum, "bench"); });
    }
    auto busBandwidth = [&](double seconds) { return 2.0 * (processes - 1) / processes * double(bytes) / seconds / 1e9; };
    if (me == 0)
      std::printf("result allreduce bytes=%lld mpi_ms=%.3f exact_ms=%.3f fast_ms=%.3f mpi_GBps=%.3f exact_GBps=%.3f "
                  "fast_GBps=%.3f exact_vs_mpi=%.3f\n",
                  static_cast<long long>(bytes), 1e3 * plain, 1e3 * modes[0], 1e3 * modes[1], busBandwidth(plain),
                  busBandwidth(modes[0]), busBandwidth(modes[1]), plain / modes[0]);
  }
  return 0;
}

int grouped(const AllreduceFlags& f) {
  const int processes = spmd::processCount(), me = spmd::processIndex(), k = f.local;
  if (processes < 2) throw spmd::Error("grouped mode needs mpirun -np 2 or more");
  using spmd::runtime::Communicator;
  auto comms = spmd::runtime::makeProcessCommunicators(k, spmd::runtime::collectiveTimeoutFromEnvironment());
  // Each replica's group over "model" (its process's K replicas) and over "data" (its local index
  // on every process).
  auto membersOf = [&](int replica, bool data) {
    std::vector<int64_t> members;
    for (int j = 0; j < (data ? processes : k); ++j)
      members.push_back(data ? int64_t(j) * k + replica % k : int64_t(replica / k) * k + j);
    return members;
  };
  for (int64_t bytes = 4096; bytes <= f.maxBytes; bytes *= 4) {
    const int64_t n = bytes / 4;
    // [what: psum over model, over data, a ring ppermute, an all_to_all, an all_to_all within the
    // data groups][way: own, through an all-gather (the last: the data groups' all_gather)]
    double times[5][2];
    std::vector<int64_t> ring;
    for (int64_t r = 0; r < int64_t(processes) * k; ++r) ring.insert(ring.end(), {r, (r + 1) % (int64_t(processes) * k)});
    for (int axis = 0; axis < 5; ++axis)
      for (int way = 0; way < 2; ++way) {
        std::vector<double> t(size_t(f.repeats + 1));
        std::vector<std::thread> replicas;
        for (int l = 0; l < k; ++l)
          replicas.emplace_back([&, l] {
            Communicator& comm = *comms[size_t(l)];
            const std::vector<int64_t> members = membersOf(comm.rank(), axis == 1 || axis == 4);
            std::vector<float> data(static_cast<size_t>(n)), out(static_cast<size_t>(n)), gathered;
            for (int64_t i = 0; i < n; ++i) data[size_t(i)] = float((i * 7 + comm.rank() * 13) % 101) * 0.01f;
            Communicator::Segment s{data.data(), n};
            const size_t block = size_t(bytes) / (size_t(processes) * size_t(k));
            for (int r = 0; r <= f.repeats; ++r) {
              comm.barrier("grouped timing");
              auto start = Clock::now();
              using spmd::runtime::Reduction;
              if (axis < 2 && way == 0) comm.allReduceInGroup({&s, 1}, {&s, 1}, spmd::DType::f32, Reduction::Sum, members, "bench").wait();
              if (axis < 2 && way == 1) comm.Communicator::allReduceInGroup({&s, 1}, {&s, 1}, spmd::DType::f32, Reduction::Sum, members, "bench").wait();
              if (axis == 2 && way == 0) comm.permute(data.data(), out.data(), size_t(bytes), ring, "bench").wait();
              if (axis == 2 && way == 1) comm.Communicator::permute(data.data(), out.data(), size_t(bytes), ring, "bench").wait();
              if (axis == 3 && way == 0) comm.allToAll(data.data(), out.data(), block, "bench").wait();
              if (axis == 3 && way == 1) comm.Communicator::allToAll(data.data(), out.data(), block, "bench").wait();
              const size_t memberBlock = size_t(bytes) / members.size();
              if (axis == 4 && way == 0) comm.allToAllInGroup(data.data(), out.data(), memberBlock, members, "bench").wait();
              if (axis == 4 && way == 1) {  // what allToAll within groups was built of before: the group's
                                            // all_gather (routed), then this replica's chunks of it
                gathered.resize(static_cast<size_t>(n) * members.size());
                comm.allGatherInGroup(data.data(), gathered.data(), size_t(bytes), members, "bench").wait();
              }
              if (l == 0) t[size_t(r)] = since(start);
            }
          });
        for (std::thread& r : replicas) r.join();
        std::vector<double> mid{median(std::vector<double>(t.begin() + 1, t.end()))};
        spmd::processSum(mid, "timings");  // mean over processes
        times[axis][way] = mid[0] / processes;
      }
    if (me == 0)
      std::printf("result grouped bytes=%lld local=%d model_ms=%.3f model_gather_ms=%.3f data_ms=%.3f "
                  "data_gather_ms=%.3f model_speedup=%.2f data_speedup=%.2f ring_ms=%.3f ring_gather_ms=%.3f "
                  "ring_speedup=%.2f a2a_ms=%.3f a2a_gather_ms=%.3f a2a_speedup=%.2f a2a_data_ms=%.3f "
                  "a2a_data_gather_ms=%.3f a2a_data_speedup=%.2f\n",
                  static_cast<long long>(bytes), k, 1e3 * times[0][0], 1e3 * times[0][1], 1e3 * times[1][0],
                  1e3 * times[1][1], times[0][1] / times[0][0], times[1][1] / times[1][0], 1e3 * times[2][0],
                  1e3 * times[2][1], times[2][1] / times[2][0], 1e3 * times[3][0], 1e3 * times[3][1],
                  times[3][1] / times[3][0], 1e3 * times[4][0], 1e3 * times[4][1], times[4][1] / times[4][0]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    spmd::cli::Flags app(
        "dist_bench", "The multi-process benchmark (benchmarks/compare_processes.py runs it, alone or under mpirun).");
    StepFlags s;
    spmd::cli::Flags& stepMode = app.subcommand("step",
                                                "the ResNet-18 train step at a global batch: median step time, "
                                                "hidden all-reduce time, arenas and peak RSS");
    stepMode.text("--devices", s.devices, "this process's devices", "LIST");
    stepMode.whole("--width", s.width, 1, 4096, "channels of the first stage");
    stepMode.whole("--batch", s.batch, 1, int64_t(1) << 24, "global batch");
    stepMode.whole("--steps", s.steps, 1, 1000000, "timed steps after one warm-up step");
    stepMode.whole("--accumulate", s.accumulate, 1, 4096, "micro-batches per device and step");
    stepMode.whole("--micro-at-once", s.microAtOnce, 0, 4096,
                   "micro-batches a device runs at once (PmapOptions::microBatchesAtOnce; 0: as many as the cores hold)");
    stepMode.flag("--shard-update", s.shardUpdate,
                  "ZeRO-1 (PmapOptions::shardUpdate): each replica updates and keeps 1/N of the optimizer state");
    stepMode.flag("--fsdp", s.fsdp,
                  "FSDP (PmapOptions::fullyShard): also 1/N of the parameters, gathered right before each layer");
    stepMode.flag("--prefetch-gathers", s.prefetch,
                  "with --fsdp: gather each layer's parameters one layer ahead (PmapOptions::prefetchGathers)");
    stepMode.flag("--remat", s.remat,
                  "recompute every residual block in the backward pass (ResNet18Config::checkpointBlocks)");
    stepMode.number("--sharded-bucket-mb", s.shardedBucketMb, 1e-6, 1e9,
                    "largest combined reduce-scatter / all-gather of --shard-update and --fsdp, in MB "
                    "(PmapOptions::shardedBucketBytes; a value below the smallest tensor: one per tensor)");
    stepMode.number(
        "--memory-budget", s.memoryBudgetMb, 0, 1e9,
        "MB one replica may hold; over it the compiler recomputes layers (PmapOptions::memoryBudget; 0: none)");
    AllreduceFlags r;
    spmd::cli::Flags& allreduceMode = app.subcommand("allreduce",
                                                     "f32 all-reduce times, exact and fast mode and "
                                                     "MPI_Allreduce, 4 KB up to --max-bytes (mpirun -np 2+)");
    allreduceMode.whole("--max-bytes", r.maxBytes, 4096, int64_t(1) << 34, "largest message");
    allreduceMode.whole("--repeats", r.repeats, 1, 1000000, "timed repeats per size");
    AllreduceFlags g;
    g.maxBytes = 4 << 20;
    spmd::cli::Flags& groupedMode = app.subcommand(
        "grouped", "f32 all-reduce within replica groups over a mesh {data: processes, model: --local}'s two axes: "
                   "the communicator's own path and an all-gather's, 4 KB up to --max-bytes a replica (mpirun -np 2+); "
                   "also a ring ppermute, an all_to_all, and one within the data groups");
    groupedMode.whole("--local", g.local, 1, 256, "replicas per process");
    groupedMode.whole("--max-bytes", g.maxBytes, 4096, int64_t(1) << 32, "largest operand of one replica");
    groupedMode.whole("--repeats", g.repeats, 1, 1000000, "timed repeats per size");
    if (auto stop = app.parse(argc, argv)) return *stop;
    if (groupedMode.given()) return grouped(g);
    return stepMode.given() ? step(s) : allreduce(r);
  } catch (const std::exception& e) {
    if (spmd::processCount() > 1) spmd::abortJob(std::string("dist_bench: ") + e.what());
    std::fprintf(stderr, "dist_bench: %s\n", e.what());
    return 1;
  }
}
