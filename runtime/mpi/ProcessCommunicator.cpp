// ProcessCommunicator: jobs shared by a process's replicas, run by its MpiEngine.
#include "runtime/mpi/ProcessCommunicator.h"

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "runtime/base/Parse.h"
#include "runtime/device/Fold.h"
#include "runtime/mpi/GroupExchange.h"
#include "runtime/mpi/MpiEngine.h"

namespace spmd::runtime {
namespace {

std::atomic<int64_t> engineNanos{0}, waitNanos{0}, reduceCount{0};

int64_t nanosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

// Routed kinds, whose replicas read parts of some others' operands (Routes moves those alone):
// Grouped (a collective within replica groups), Permute (ppermute), AllToAll (blocks).
enum class Kind { AllReduce, AllGather, Barrier, Grouped, Permute, AllToAll };

// Uninitialised byte buffers kept for reuse: a fresh megabyte-sized allocation costs more in
// page faults than the collective itself.
class BufferPool {
 public:
  struct Buffer {
    std::unique_ptr<std::byte[]> bytes;
    size_t capacity = 0;
    std::byte* data() const { return bytes.get(); }
  };
  Buffer get(size_t size) {
    std::lock_guard lock(mutex_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->capacity >= size && (best == free_.end() || it->capacity < best->capacity)) best = it;
    if (best != free_.end()) {
      Buffer b = std::move(*best);
      free_.erase(best);
      return b;
    }
    return {std::make_unique_for_overwrite<std::byte[]>(std::max<size_t>(size, 1)), std::max<size_t>(size, 1)};
  }
  void put(Buffer b) {
    if (!b.bytes) return;
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(b));
    if (free_.size() > 8) {  // keep the largest few
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](const Buffer& a, const Buffer& c) { return a.capacity < c.capacity; });
      free_.erase(smallest);
    }
  }

 private:
  std::mutex mutex_;
  std::vector<Buffer> free_;
};

// One collective of the process: every local replica copies its operand in; the last one
// queues it on the engine; the engine fills `result`.
struct ReductionJob {
  explicit ReductionJob(std::shared_ptr<BufferPool> pool) : pool(std::move(pool)) {}
  ~ReductionJob() {
    pool->put(std::move(send));
    pool->put(std::move(result));
  }
  std::shared_ptr<BufferPool> pool;
  Kind kind;
  DType dtype = DType::f32;
  Reduction op = Reduction::Sum;
  int64_t count = 0;  // all-reduce (grouped reduce, reduce_scatter): elements per replica; all-gather: bytes
  GroupOp groupOp = GroupOp::Reduce;
  std::vector<std::vector<int64_t>> members;  // grouped: each local replica's group
  std::vector<int64_t> pairs;                 // permute: the (source, target) pairs, flattened
  // Routed: set by the engine (a grouped job's routes are its exchange's); result holds the inbox.
  std::unique_ptr<GroupExchange> exchange;
  std::unique_ptr<Routes> routes;
  const Routes& plan() const { return exchange ? exchange->routes() : *routes; }
  std::string what;
  BufferPool::Buffer send, result;
  size_t sendBytes = 0;
  // A synchronous call of one replica per process on one buffer: MPI reads the operand from,
  // and writes the result to, the caller's memory (no staging copies).
  std::byte* direct = nullptr;
  const std::byte* sendData() const { return direct ? direct : send.data(); }
  int arrived = 0;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
};

// The tag of a grouped collective's point-to-point messages (the engine runs one piece of work at
// a time, so they never meet another collective's).
constexpr int kGroupedTag = 7;

MPI_Datatype mpiDatatype(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT;
    case DType::bf16: break;  // MPI has no bf16; the compiler widens bf16 collectives to f32
  }
  throw bf16NotWidened("a collective across processes");
}

MPI_Op mpiOp(Reduction op) {
  switch (op) {
    case Reduction::Sum:
    case Reduction::Mean: return MPI_SUM;
    case Reduction::Max: return MPI_MAX;
    case Reduction::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

int mpiCount(int64_t n, const std::string& what) {
  if (n > INT_MAX)
    throw Error(what + ": " + std::to_string(n) + " bytes in one message exceed MPI's int count; lower "
                "the all-reduce bucket size (PmapOptions::bucketBytes) or split the tensor");
  return static_cast<int>(n);
}

// Bytes of one element of a job's count: an all-gather's count is bytes.
size_t elementBytes(const ReductionJob& job) {
  const bool bytes = job.kind == Kind::AllGather || job.kind == Kind::Permute || job.kind == Kind::AllToAll ||
                     (job.kind == Kind::Grouped && (job.groupOp == GroupOp::Gather || job.groupOp == GroupOp::Exchange));
  return bytes ? 1 : dtypeSize(job.dtype);
}

// What a routed collective's replica brings besides its operand: a grouped collective's op and
// the replica's group (its members, in group order), or a ppermute's (source, target) pairs.
struct Routing {
  GroupOp op = GroupOp::Reduce;
  std::span<const int64_t> ranks;
};

// State the K replicas of this process share.
class Group {
 public:
  Group(int local, int leavesPerReplica, std::chrono::milliseconds timeout, ReduceMode mode)
      : local_(local), processes_(processes().size), rank_(processes().rank), leaves_(leavesPerReplica),
        timeout_(timeout), mode_(mode), next_(local), engine_(MpiEngine::instance()) {
    engine_.setReplicasPerProcess(local);
    overlap_ = envSwitch("SPMD_OVERLAP").value_or(true);
    // The fold tree over all P * K * A leaves: each replica hands in the subtree(s) of its A
    // leaves, each process reduces its block to its maximal subtrees (one root for an aligned
    // power-of-two block), and the owner of a slice folds every process's roots.
    std::vector<FoldNode> all;
    for (int q = 0; q < processes_; ++q) {
      std::vector<FoldNode> replicas;
      for (int l = 0; l < local_; ++l) {
        int64_t first = (int64_t(q) * local_ + l) * leaves_;
        for (FoldNode n : foldBlock(first, first + leaves_)) replicas.push_back(n);
      }
      FoldPlan block(replicas, /*complete=*/false);
      if (q == rank_) localPlan_ = std::make_unique<FoldPlan>(block);
      rootsOf_.push_back(int(block.roots().size()));
      all.insert(all.end(), block.roots().begin(), block.roots().end());
    }
    globalPlan_ = std::make_unique<FoldPlan>(all, /*complete=*/true);
    if (localPlan_->sourceCount() != local_)
      throw Error("accumulation over " + std::to_string(leaves_) + " steps needs a power of two (each replica "
                  "hands in one subtree of the fold tree); use 1, 2, 4, 8, ...");
  }
  int local() const { return local_; }
  int leaves() const { return leaves_; }
  int processCount() const { return processes_; }
  int rank() const { return rank_; }
  bool overlap() const { return overlap_; }

  // Replica `l` joins its next collective with its operand (segments of one flat vector).
  std::shared_ptr<ReductionJob> join(int l, Kind kind, std::span<const Communicator::Segment> in, DType dtype,
                            Reduction op, int64_t count, const std::string& what, bool waits = false,
                            Routing routing = {}) {
    // Direct: the caller waits for the result, and its buffer is the whole operand in the layout
    // MPI sends (one replica per process; fast mode, or exact mode whose slices are in order).
    const bool direct = waits && local_ == 1 && kind == Kind::AllReduce && in.size() == 1;
    std::shared_ptr<ReductionJob> job;
    uint64_t seq;
    {
      std::lock_guard lock(mutex_);
      seq = next_[l]++;
      std::shared_ptr<ReductionJob>& slot = open_[seq];
      if (!slot) {
        slot = std::make_shared<ReductionJob>(pool_);
        slot->kind = kind, slot->dtype = dtype, slot->op = op, slot->count = count, slot->what = what;
        slot->groupOp = routing.op;
        if (kind == Kind::Grouped) slot->members.resize(size_t(local_));
        if (kind == Kind::Permute) slot->pairs.assign(routing.ranks.begin(), routing.ranks.end());
        slot->sendBytes = size_t(local_) * size_t(count) * elementBytes(*slot);
        if (direct) slot->direct = static_cast<std::byte*>(in[0].data);
        else slot->send = pool_->get(slot->sendBytes);
      } else if (slot->kind != kind || slot->count != count || slot->dtype != dtype || slot->op != op ||
                 slot->groupOp != routing.op) {
        throw Error("replica " + std::to_string(l) + " calls " + what + " where another replica of this process calls " +
                    slot->what + "; the replicas of one program must run the same collectives");
      }
      if (kind == Kind::Grouped) slot->members[size_t(l)].assign(routing.ranks.begin(), routing.ranks.end());
      job = slot;
    }
    if (!job->direct) pack(*job, l, in);
    std::lock_guard lock(mutex_);
    if (++job->arrived == local_) {
      open_.erase(seq);
      // Queued under the lock, so jobs reach the engine in sequence order on every process.
      engine_.submit([this, job] { execute(*job); }, job->what, timeout_);
    }
    return job;
  }

  // Waits for `job` on replica `l`, then copies its result into `out`.
  void finish(ReductionJob& job, int l, std::span<const Communicator::Segment> out) {
    auto start = std::chrono::steady_clock::now();
    {
      std::unique_lock lock(job.mutex);
      // The engine's watchdog ends the job if MPI waits too long; this catches a local replica
      // that never arrived (the job was never queued).
      if (!job.cv.wait_for(lock, timeout_ + std::chrono::seconds(10), [&] { return job.done; })) {
        lock.unlock();
        abortJob(job.what + " timed out on replica " + std::to_string(rank_ * local_ + l) + ": " +
                 std::to_string(local_ - job.arrived) + " replica(s) of this process never reached it");
      }
    }
    if (job.kind == Kind::AllReduce && l == 0) waitNanos += nanosSince(start);  // one replica's view
    if (job.direct) return;  // the result is already in place
    if (job.kind == Kind::Grouped) return finishGrouped(job, l, out);
    if (job.kind == Kind::Permute || job.kind == Kind::AllToAll) return finishRouted(job, l, out);
    const std::byte* from = job.result.data();
    const size_t e = elementBytes(job);
    for (const auto& s : out) {
      std::memcpy(s.data, from, s.count * e);
      from += s.count * e;
    }
  }

 private:
  // Copies replica l's operand into the job's send buffer.
  void pack(ReductionJob& job, int l, std::span<const Communicator::Segment> in) {
    const size_t e = elementBytes(job);
    const int64_t n = job.count;
    auto copyRange = [&](int64_t begin, int64_t end, std::byte* to) {  // elements [begin, end) of the operand
      int64_t at = 0;
      for (const auto& s : in) {
        int64_t lo = std::max(begin, at), hi = std::min(end, at + s.count);
        if (lo < hi) std::memcpy(to + (lo - begin) * e, static_cast<const std::byte*>(s.data) + (lo - at) * e, (hi - lo) * e);
        at += s.count;
      }
    };
    if (job.kind == Kind::AllReduce && mode_ == ReduceMode::Exact) {
      // To process j: its slice of every local replica, replica by replica.
      for (int j = 0; j < processes_; ++j) {
        int64_t begin = n * j / processes_, end = n * (j + 1) / processes_;
        copyRange(begin, end, job.send.data() + (local_ * begin + l * (end - begin)) * e);
      }
    } else {
      copyRange(0, n, job.send.data() + l * n * e);
    }
  }

  void execute(ReductionJob& job) {
    auto start = std::chrono::steady_clock::now();
    MPI_Comm comm = engine_.comm();
    const int P = processes_, K = local_;
    if (job.kind == Kind::Barrier) {
      checkMpi(MPI_Barrier(comm), "MPI_Barrier", job.what);
    } else if (job.kind == Kind::Grouped || job.kind == Kind::Permute || job.kind == Kind::AllToAll) {
      exchangeRouted(job, comm);
    } else if (job.kind == Kind::AllGather) {
      job.result = pool_->get(size_t(P) * job.sendBytes);
      int bytes = mpiCount(int64_t(job.sendBytes), job.what);
      checkMpi(MPI_Allgather(job.sendData(), bytes, MPI_BYTE, job.result.data(), bytes, MPI_BYTE, comm),
               "MPI_Allgather", job.what);
    } else if (mode_ == ReduceMode::Exact) {
      reduceExact(job, comm, P, K);
    } else {
      reduceFast(job, comm, P, K);
    }
    if (job.kind == Kind::AllReduce) engineNanos += nanosSince(start), ++reduceCount;
    {
      std::lock_guard lock(job.mutex);
      job.done = true;
    }
    job.cv.notify_all();
  }

  // Reduce-scatter by pairwise exchange (step s: send to rank + s, receive from rank - s) of
  // each process's block roots, so this process's own are folded where they lie instead of
  // being copied through MPI; then the fold tree over every process's roots, and the slices
  // gathered in place.
  void reduceExact(ReductionJob& job, MPI_Comm comm, int P, int K) {
    const int64_t n = job.count, e = dtypeSize(job.dtype);
    auto begin = [&](int j) { return n * j / P; };
    const int64_t mine = begin(rank_ + 1) - begin(rank_);
    // The send buffer holds, for each process j, slice j of every local replica (K * len_j
    // elements at K * begin(j)); the block's roots replace the first R of them in place.
    std::byte* operand = job.direct ? job.direct : job.send.data();
    const int R = rootsOf_[rank_];
    if (K > 1)
      for (int j = 0; j < P; ++j) {
        const int64_t len = begin(j + 1) - begin(j);
        std::byte* region = operand + K * begin(j) * e;
        std::vector<const void*> sources(K);
        std::vector<void*> roots(R);
        for (int l = 0; l < K; ++l) sources[l] = region + l * len * e;
        for (int r = 0; r < R; ++r) roots[r] = region + r * len * e;
        localPlan_->run(job.dtype, sources.data(), 0, len, job.op, 1, roots.data());
      }
    std::vector<int64_t> rootsBefore(P + 1, 0);
    for (int q = 0; q < P; ++q) rootsBefore[q + 1] = rootsBefore[q] + rootsOf_[q];
    std::vector<std::byte>& received = received_;  // the engine thread's own, reused
    if (received.size() < size_t(rootsBefore[P]) * mine * e) received.resize(size_t(rootsBefore[P]) * mine * e);
    for (int s = 1; s < P; ++s) {
      int to = (rank_ + s) % P, from = (rank_ - s + P) % P;
      int sendBytes = mpiCount(R * (begin(to + 1) - begin(to)) * e, job.what);
      int recvBytes = mpiCount(rootsOf_[from] * mine * e, job.what);
      checkMpi(MPI_Sendrecv(operand + K * begin(to) * e, sendBytes, MPI_BYTE, to, 0,
                            received.data() + size_t(rootsBefore[from]) * mine * e, recvBytes, MPI_BYTE, from, 0,
                            comm, MPI_STATUS_IGNORE),
               "MPI_Sendrecv", job.what);
    }
    // Every process's roots in leaf order: this process's own from the operand, the others as received.
    std::vector<const void*> sources(static_cast<size_t>(rootsBefore[P]));
    for (int q = 0; q < P; ++q)
      for (int r = 0; r < rootsOf_[q]; ++r)
        sources[size_t(rootsBefore[q] + r)] = q == rank_ ? operand + (K * begin(rank_) + r * mine) * e
                                                         : received.data() + size_t(rootsBefore[q] + r) * mine * e;
    if (!job.direct) job.result = pool_->get(n * e);
    std::byte* result = job.direct ? job.direct : job.result.data();
    // Fold this process's slice straight into its place in the result (with K = 1 in place over
    // its own root, which FoldPlan allows), then gather in place.
    void* out[] = {result + begin(rank_) * e};
    globalPlan_->run(job.dtype, sources.data(), 0, mine, job.op, P * K * leaves_, out);
    std::vector<int> counts(P), offsets(P);
    for (int j = 0; j < P; ++j) {
      counts[j] = mpiCount((begin(j + 1) - begin(j)) * e, job.what);
      offsets[j] = mpiCount(begin(j) * e, job.what);
    }
    checkMpi(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, result, counts.data(), offsets.data(), MPI_BYTE, comm),
             "MPI_Allgatherv", job.what);
  }

  // A routed collective: each process sends the other processes only the pieces of its replicas'
  // operands their replicas read (Routes: within replica groups by GroupExchange's rule; a
  // ppermute's source operand; an all_to_all's block), point to point; the replicas then fold
  // or copy theirs in finish. What stays within this process moves nothing.
  void exchangeRouted(ReductionJob& job, MPI_Comm comm) {
    const size_t operandBytes = size_t(job.count) * elementBytes(job);
    if (job.kind == Kind::Grouped) {
      job.exchange = std::make_unique<GroupExchange>(job.groupOp, job.members, rank_, processes_, operandBytes);
    } else if (job.kind == Kind::Permute) {
      job.routes = std::make_unique<Routes>(permuteRoutes(job.pairs, rank_, processes_, local_, operandBytes));
    } else {
      job.routes = std::make_unique<Routes>(blockRoutes(rank_, processes_, local_, operandBytes));
    }
    const Routes& plan = job.plan();
    job.result = pool_->get(plan.inboxBytes());
    BufferPool::Buffer outbox = pool_->get(plan.outboxBytes());
    plan.pack(job.send.data(), outbox.data());
    std::vector<MPI_Request> requests;
    for (int q = 0; q < processes_; ++q)
      if (plan.receiveBytes(q) > 0) {
        requests.emplace_back();
        checkMpi(MPI_Irecv(job.result.data() + plan.receiveOffset(q), mpiCount(int64_t(plan.receiveBytes(q)), job.what),
                           MPI_BYTE, q, kGroupedTag, comm, &requests.back()),
                 "MPI_Irecv", job.what);
      }
    for (int q = 0; q < processes_; ++q)
      if (plan.sendBytes(q) > 0) {
        requests.emplace_back();
        checkMpi(MPI_Isend(outbox.data() + plan.sendOffset(q), mpiCount(int64_t(plan.sendBytes(q)), job.what), MPI_BYTE,
                           q, kGroupedTag, comm, &requests.back()),
                 "MPI_Isend", job.what);
      }
    checkMpi(MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", job.what);
    pool_->put(std::move(outbox));
  }

  // Replica l's result of a grouped collective, from its group's operands: the fold over the tree
  // of the group's size in group order (a mean divides by it), or the members' operands stacked.
  void finishGrouped(ReductionJob& job, int l, std::span<const Communicator::Segment> out) {
    const GroupExchange& plan = *job.exchange;
    const std::vector<const std::byte*> rows = plan.sources(l, job.send.data(), job.result.data());
    const int g = int(plan.groupSize());
    if (job.groupOp == GroupOp::Gather || job.groupOp == GroupOp::Exchange) {  // the members' operands or blocks
      for (size_t k = 0; k < rows.size(); ++k)
        std::memcpy(static_cast<std::byte*>(out[0].data) + k * plan.sourceBytes(), rows[k], plan.sourceBytes());
      return;
    }
    std::vector<const void*> sources(rows.begin(), rows.end());
    int64_t at = 0;  // the operand's elements, segment by segment (a reduce_scatter's row: one segment)
    for (const auto& s : out) {
      foldTree(job.dtype, sources.data(), g, at, at + s.count, job.op, g, s.data);
      at += s.count;
    }
  }

  // Replica l's ppermute result (its source's operand, or zeros) or all_to_all blocks (block j:
  // replica j's block for l).
  void finishRouted(ReductionJob& job, int l, std::span<const Communicator::Segment> out) {
    const Routes& plan = job.plan();
    const int64_t me = int64_t(rank_) * local_ + l;
    auto* to = static_cast<std::byte*>(out[0].data);
    if (job.kind == Kind::Permute) {
      const int64_t source = ppermuteSource(job.pairs, me);
      if (source < 0) std::memset(to, 0, size_t(job.count));
      else std::memcpy(to, plan.piece(l, source, job.send.data(), job.result.data()), size_t(job.count));
      return;
    }
    const int64_t replicas = int64_t(processes_) * local_;
    const size_t block = size_t(job.count) / size_t(replicas);
    for (int64_t j = 0; j < replicas; ++j)
      std::memcpy(to + size_t(j) * block, plan.piece(l, j, job.send.data(), job.result.data()), block);
  }

  void reduceFast(ReductionJob& job, MPI_Comm comm, int P, int K) {
    const int64_t n = job.count, e = dtypeSize(job.dtype);
    std::vector<const void*> sources(K);
    for (int l = 0; l < K; ++l) sources[l] = job.sendData() + l * n * e;
    Reduction local = job.op == Reduction::Mean ? Reduction::Sum : job.op;
    std::byte* result = job.direct;  // in place: the operand is the partial sum of K = 1
    if (!result) {
      job.result = pool_->get(n * e);
      result = job.result.data();
      void* out[] = {result};
      FoldPlan::leaves(K).run(job.dtype, sources.data(), 0, n, local, 1, out);
    }
    mpiCount(n * e, job.what);
    checkMpi(MPI_Allreduce(MPI_IN_PLACE, result, static_cast<int>(n), mpiDatatype(job.dtype), mpiOp(job.op), comm),
             "MPI_Allreduce", job.what);
    if (job.op == Reduction::Mean) {
      const void* one[] = {result};
      void* out[] = {result};
      FoldPlan::leaves(1).run(job.dtype, one, 0, n, Reduction::Mean, P * K * leaves_, out);
    }
  }

  const int local_, processes_, rank_, leaves_;
  std::unique_ptr<FoldPlan> localPlan_, globalPlan_;  // this process's block; every process's roots
  std::vector<int> rootsOf_;                           // roots each process hands on
  const std::chrono::milliseconds timeout_;
  const ReduceMode mode_;
  bool overlap_ = true;
  std::mutex mutex_;
  std::vector<uint64_t> next_;                         // next sequence number, per replica
  std::map<uint64_t, std::shared_ptr<ReductionJob>> open_;      // jobs not every replica has joined
  MpiEngine& engine_;
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  std::vector<std::byte> received_;  // used by the engine thread only
};

class ProcessCommunicator final : public Communicator {
 public:
  ProcessCommunicator(std::shared_ptr<Group> group, int local) : group_(std::move(group)), local_(local) {}
  int rank() const override { return group_->rank() * group_->local() + local_; }
  int size() const override { return group_->processCount() * group_->local(); }
  int leavesPerRank() const override { return group_->leaves(); }

  // In the background (asked for, and overlap on: SPMD_OVERLAP=0 turns it off) the operands are
  // copied into the job now and the communication thread reduces them while the caller goes on;
  // wait() copies the result out. Else the call waits, one operand reducing in place in its
  // result buffer.
  Pending allReduce(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                    const std::string& what, bool background) override {
    int64_t count = 0;
    for (const auto& s : in) count += s.count;
    const std::string described = describe(what, dtype, count, op);
    if (background && group_->overlap()) {
      std::shared_ptr<ReductionJob> job = group_->join(local_, Kind::AllReduce, in, dtype, op, count, described);
      std::vector<Segment> results(out.begin(), out.end());
      return Pending([group = group_, job, l = local_, results] { group->finish(*job, l, results); });
    }
    if (in.size() == 1 && out[0].data != in[0].data)
      std::memcpy(out[0].data, in[0].data, size_t(in[0].count) * dtypeSize(dtype));
    std::span<const Segment> operand = in.size() == 1 ? out : in;
    auto job = group_->join(local_, Kind::AllReduce, operand, dtype, op, count, described, /*waits=*/true);
    group_->finish(*job, local_, out);
    return {};
  }
  // In the background (as allReduce's) the operand is copied into the job now and the
  // communication thread gathers while the caller goes on (FSDP's prefetched gathers); wait()
  // copies the result out.
  Pending allGather(const void* in, void* out, size_t bytes, const std::string& what, bool background) override {
    Segment s{const_cast<void*>(in), int64_t(bytes)};
    auto job = group_->join(local_, Kind::AllGather, {&s, 1}, DType::f32, Reduction::Sum, int64_t(bytes),
                            what + " (" + std::to_string(bytes) + " bytes)");
    Segment o{out, int64_t(bytes) * size()};
    if (background && group_->overlap())
      return Pending([group = group_, job, l = local_, o] { group->finish(*job, l, {&o, 1}); });
    group_->finish(*job, local_, {&o, 1});
    return {};
  }
  // Within replica groups: only the operands other processes' members need cross processes
  // (GroupExchange); the replicas fold their group's in their own thread.
  Pending allReduceInGroup(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                           std::span<const int64_t> members, const std::string& what) override {
    int64_t count = 0;
    for (const auto& s : in) count += s.count;
    auto job = group_->join(local_, Kind::Grouped, in, dtype, op, count, describe(what, dtype, count, op), false,
                            {GroupOp::Reduce, members});
    group_->finish(*job, local_, out);
    return {};
  }
  Pending allGatherInGroup(const void* in, void* out, size_t bytes, std::span<const int64_t> members,
                           const std::string& what) override {
    Segment s{const_cast<void*>(in), int64_t(bytes)}, o{out, int64_t(bytes * members.size())};
    auto job = group_->join(local_, Kind::Grouped, {&s, 1}, DType::f32, Reduction::Sum, int64_t(bytes),
                            what + " (" + std::to_string(bytes) + " bytes)", false, {GroupOp::Gather, members});
    group_->finish(*job, local_, {&o, 1});
    return {};
  }
  Pending reduceScatterInGroup(const void* in, void* out, DType dtype, int64_t count, Reduction op,
                               std::span<const int64_t> members, const std::string& what) override {
    Segment s{const_cast<void*>(in), count}, o{out, count / int64_t(members.size())};
    auto job = group_->join(local_, Kind::Grouped, {&s, 1}, dtype, op, count, describe(what, dtype, count, op), false,
                            {GroupOp::Scatter, members});
    group_->finish(*job, local_, {&o, 1});
    return {};
  }
  // Only the pairs that cross processes move between them.
  Pending permute(const void* in, void* out, size_t bytes, std::span<const int64_t> pairs,
                  const std::string& what) override {
    Segment s{const_cast<void*>(in), int64_t(bytes)}, o{out, int64_t(bytes)};
    auto job = group_->join(local_, Kind::Permute, {&s, 1}, DType::f32, Reduction::Sum, int64_t(bytes),
                            what + " (" + std::to_string(bytes) + " bytes)", false, {GroupOp::Reduce, pairs});
    group_->finish(*job, local_, {&o, 1});
    return {};
  }
  // Within groups each block moves alone to the process of its member (none within a process).
  Pending allToAllInGroup(const void* in, void* out, size_t blockBytes, std::span<const int64_t> members,
                          const std::string& what) override {
    const int64_t bytes = int64_t(blockBytes * members.size());
    Segment s{const_cast<void*>(in), bytes}, o{out, bytes};
    auto job = group_->join(local_, Kind::Grouped, {&s, 1}, DType::f32, Reduction::Sum, bytes,
                            what + " (" + std::to_string(bytes) + " bytes)", false, {GroupOp::Exchange, members});
    group_->finish(*job, local_, {&o, 1});
    return {};
  }
  // Each block moves alone, to the process of its replica.
  Pending allToAll(const void* in, void* out, size_t blockBytes, const std::string& what) override {
    const int64_t bytes = int64_t(blockBytes) * size();
    Segment s{const_cast<void*>(in), bytes}, o{out, bytes};
    auto job = group_->join(local_, Kind::AllToAll, {&s, 1}, DType::f32, Reduction::Sum, bytes,
                            what + " (" + std::to_string(bytes) + " bytes)");
    group_->finish(*job, local_, {&o, 1});
    return {};
  }
  void barrier(const std::string& what) override {
    auto job = group_->join(local_, Kind::Barrier, {}, DType::f32, Reduction::Sum, 0, what);
    group_->finish(*job, local_, {});
  }
  void abort(const std::string& error) override { abortJob(error); }

 private:
  static std::string describe(const std::string& what, DType dtype, int64_t count, Reduction op) {
    return what + " (" + std::string(dtypeName(dtype)) + " x " + std::to_string(count) + ", " + reductionName(op) + ")";
  }
  std::shared_ptr<Group> group_;
  int local_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> makeProcessCommunicators(int localReplicas,
                                                                    std::chrono::milliseconds timeout,
                                                                    int leavesPerReplica) {
  auto group = std::make_shared<Group>(localReplicas, leavesPerReplica, timeout, reduceModeFromEnvironment());
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int l = 0; l < localReplicas; ++l) comms.push_back(std::make_unique<ProcessCommunicator>(group, l));
  return comms;
}

CollectiveTimes collectiveTimes() {
  return {engineNanos.load() * 1e-9, waitNanos.load() * 1e-9, reduceCount.load()};
}

void resetCollectiveTimes() { engineNanos = 0, waitNanos = 0, reduceCount = 0; }

}  // namespace spmd::runtime
