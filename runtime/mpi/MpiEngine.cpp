// MpiEngine: MPI start and finalization, the communication thread, the watchdog.
#include "runtime/mpi/MpiEngine.h"

#include "runtime/base/Timeline.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/base/Parse.h"

namespace spmd::runtime {
namespace {

MpiEngine* theEngine = nullptr;

// Owns MPI for the life of the process: the engine stops, then MPI finalizes, when static
// objects are destroyed after main returns.
struct MpiJob {
  std::unique_ptr<MpiEngine> engine;
  explicit MpiJob(const ProcessInfo& info) : engine(std::make_unique<MpiEngine>(info)) { theEngine = engine.get(); }
  ~MpiJob() {
    engine.reset();
    theEngine = nullptr;
    MPI_Finalize();
  }
};

constexpr int kArrivalTag = 7001;
constexpr int kSignatureBytes = 160;

std::string seconds(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", t.count() / 1000.0);
  return text;
}

}  // namespace

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

void checkMpi(int code, const char* call, const std::string& what) {
  if (code != MPI_SUCCESS) throw Error(what + ": " + call + " failed: " + mpiErrorText(code));
}

void startMpiJob(ProcessInfo& info) {
  // The switches the engine reads, checked before MPI starts: a junk value is our error on every
  // process, not a half-started MPI.
  envSwitch("SPMD_CHECK_COLLECTIVES");
  int provided = 0;
  int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (code != MPI_SUCCESS)
    throw Error("launched under mpirun, but MPI could not start (MPI_Init_thread: " + mpiErrorText(code) + ")");
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw Error("the MPI library gives thread level " + std::to_string(provided) +
                ", not MPI_THREAD_MULTIPLE, which spmd's communication thread and watchdog need; use an "
                "Open MPI built with thread support (Debian's openmpi-bin is)");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &info.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &info.size);
  char host[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(host, &length);
  info.host.assign(host, length);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  MPI_Comm_size(local, &info.localSize);
  MPI_Comm_free(&local);
  static MpiJob job(info);
}

MpiEngine& MpiEngine::instance() {
  if (!theEngine) throw Error("internal: the MPI engine is used in a job of one process");
  return *theEngine;
}

MpiEngine::MpiEngine(const ProcessInfo& info) : info_(info) {
  MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  MPI_Comm_dup(MPI_COMM_WORLD, &watchComm_);
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  check_ = envSwitch("SPMD_CHECK_COLLECTIVES").value_or(false);
  thread_ = std::thread([this] { serve(); });
  watchdog_ = std::thread([this] { watch(); });
}

MpiEngine::~MpiEngine() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  watchWake_.notify_all();
  thread_.join();
  watchdog_.join();
  MPI_Comm_free(&comm_);
  MPI_Comm_free(&watchComm_);
}

void MpiEngine::submit(std::function<void()> work, std::string what, std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back({std::move(work), std::move(what), timeout});
  }
  wake_.notify_one();
}

void MpiEngine::run(std::function<void()> work, std::string what, std::chrono::milliseconds timeout) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  submit(
      [&] {
        work();
        std::lock_guard lock(m);
        done = true;
        cv.notify_all();
      },
      std::move(what), timeout);
  std::unique_lock lock(m);
  cv.wait(lock, [&] { return done; });
}

void MpiEngine::serve() {
  for (;;) {
    Work work;
    uint64_t seq;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      work = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      seq = ++seq_;
      current_ = work.what;
      started_ = std::chrono::steady_clock::now();
      currentTimeout_ = work.timeout;
    }
    watchWake_.notify_all();
    try {
      if (check_) checkSame(work.what, seq);
      const auto begin = timeline::Clock::now();
      work.fn();
      if (timeline::on()) {
        static const int track = timeline::track("communication thread");
        timeline::span(track, "collective #" + std::to_string(seq), "collective", begin, timeline::Clock::now(), work.what);
      }
    } catch (const std::exception& e) {
      abortJob(work.what + " (collective #" + std::to_string(seq) + ") failed: " + e.what());
    }
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    watchWake_.notify_all();
  }
}

void MpiEngine::watch() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    if (!busy_) {
      watchWake_.wait(lock);
      continue;
    }
    uint64_t seq = seq_;
    auto deadline = started_ + currentTimeout_;
    if (watchWake_.wait_until(lock, deadline, [&] { return stop_ || !busy_ || seq_ != seq; })) continue;
    std::string what = current_;
    auto timeout = currentTimeout_;
    lock.unlock();
    timedOut(what, seq, timeout);
  }
}

void MpiEngine::timedOut(const std::string& what, uint64_t seq, std::chrono::milliseconds timeout) {
  // Tell every process where this one waits, and listen for two seconds to where they are
  // (processes that time out in the same collective answer; a stuck one does not).
  uint64_t mine = seq;
  std::vector<MPI_Request> sends;
  for (int r = 0; r < info_.size; ++r) {
    if (r == info_.rank) continue;
    sends.emplace_back();
    MPI_Isend(&mine, 1, MPI_UINT64_T, r, kArrivalTag, watchComm_, &sends.back());
  }
  std::vector<int64_t> at(info_.size, -1);
  at[info_.rank] = static_cast<int64_t>(seq);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int heard = 1;
  while (heard < info_.size && std::chrono::steady_clock::now() < until) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kArrivalTag, watchComm_, &flag, &status);
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    uint64_t theirs = 0;
    MPI_Recv(&theirs, 1, MPI_UINT64_T, status.MPI_SOURCE, kArrivalTag, watchComm_, MPI_STATUS_IGNORE);
    if (at[status.MPI_SOURCE] < 0) ++heard;
    at[status.MPI_SOURCE] = static_cast<int64_t>(theirs);
  }
  std::string missing, elsewhere;
  const int k = replicasPerProcess_;
  for (int r = 0; r < info_.size; ++r) {
    if (at[r] < 0)
      missing += (missing.empty() ? "" : ", ") + std::to_string(r) +
                 (k == 1   ? " (replica " + std::to_string(r) + ")"
                  : k > 1 ? " (replicas " + std::to_string(r * k) + "-" + std::to_string(r * k + k - 1) + ")"
                          : "");
    else if (at[r] != static_cast<int64_t>(seq))
      elsewhere += "; process " + std::to_string(r) + " waits in collective #" + std::to_string(at[r]);
  }
  abortJob(what + " (collective #" + std::to_string(seq) + " of this job) timed out after " + seconds(timeout) +
           " s" + (missing.empty() ? "" : ": process(es) " + missing + " never reached it") + elsewhere +
           " (stuck, or running a different sequence of collectives: SPMD_CHECK_COLLECTIVES=1 checks "
           "that every process calls the same ones). Raise the limit with SPMD_COLLECTIVE_TIMEOUT=<seconds> "
           "if a step is legitimately that slow");
}

void MpiEngine::checkSame(const std::string& what, uint64_t seq) {
  char mine[kSignatureBytes] = {};
  std::snprintf(mine, sizeof mine, "%s", what.c_str());
  std::vector<char> all(size_t(info_.size) * kSignatureBytes);
  checkMpi(MPI_Allgather(mine, kSignatureBytes, MPI_CHAR, all.data(), kSignatureBytes, MPI_CHAR, comm_),
           "MPI_Allgather", "SPMD_CHECK_COLLECTIVES");
  for (int r = 0; r < info_.size; ++r) {
    const char* theirs = all.data() + size_t(r) * kSignatureBytes;
    if (std::strncmp(theirs, mine, kSignatureBytes) != 0)
      abortJob("SPMD_CHECK_COLLECTIVES: the processes disagree at collective #" + std::to_string(seq) +
               ": this process calls '" + what + "' but process " + std::to_string(r) + " calls '" +
               std::string(theirs, strnlen(theirs, kSignatureBytes)) +
               "'; every process must run the same compiled steps and host collectives in the same order");
  }
}

}  // namespace spmd::runtime
