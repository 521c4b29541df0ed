// NcclCommunicator: NCCL ranks for cuda replicas, wrapping the host-side communicator.
#include "runtime/cuda/Nccl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/NcclFold.h"
#include "runtime/device/DeviceList.h"
#include "runtime/mpi/Processes.h"  // ReduceMode

namespace spmd::runtime {
namespace {

using cuda::check;

void checkNccl(ncclResult_t result, const std::string& call, const std::string& what, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  std::string detail = ncclGetErrorString(result);
  if (const char* last = comm ? ncclGetLastError(comm) : nullptr; last && *last) detail += ": " + std::string(last);
  throw Error(what + ": " + call + " failed (" + detail + "); NCCL_DEBUG=WARN prints NCCL's own account");
}

ncclDataType_t ncclType(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::i32: return ncclInt32;
    case DType::bf16: return ncclBfloat16;
  }
  return ncclUint8;
}

ncclRedOp_t ncclOp(Reduction op) {
  switch (op) {
    case Reduction::Sum: return ncclSum;
    case Reduction::Mean: return ncclAvg;
    case Reduction::Max: return ncclMax;
    case Reduction::Min: return ncclMin;
  }
  return ncclSum;
}

// What the NCCL ranks of this process share: a failure on one replica stops the others' waits.
struct Shared {
  std::atomic<bool> aborted{false};
};

class NcclCommunicator final : public Communicator, public DeviceCollectives {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> host, ncclComm_t comm, int gpu, std::shared_ptr<Shared> shared,
                   std::chrono::milliseconds timeout, ReduceMode mode)
      : host_(std::move(host)), comm_(comm), gpu_(gpu), shared_(std::move(shared)), timeout_(timeout), mode_(mode) {}
  ~NcclCommunicator() override {
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  Pending allReduce(std::span<const Segment> in, std::span<const Segment> out, DType dtype, Reduction op,
                    const std::string& what, bool background) override {
    return host_->allReduce(in, out, dtype, op, what, background);
  }
  Pending allGather(const void* in, void* out, size_t bytes, const std::string& what, bool background) override {
    return host_->allGather(in, out, bytes, what, background);
  }
  PointerExchange* pointers() override { return host_->pointers(); }
  void barrier(const std::string& what) override { host_->barrier(what); }
  void abort(const std::string& error) override {
    shared_->aborted = true;
    host_->abort(error);
  }
  void reset() override {
    host_->reset();
    shared_->aborted = false;
  }
  DeviceCollectives* deviceCollectives() override { return this; }

  void allReduce(void* data, DType dtype, int64_t count, Reduction op, void* stream,
                 const std::string& what) override {
    usable(what);
    auto s = static_cast<cudaStream_t>(stream);
    refuseWhileCapturing(s, what);
    if (mode_ == ReduceMode::Fast) {
      checkNccl(ncclAllReduce(data, data, size_t(count), ncclType(dtype), ncclOp(op), comm_, s), "ncclAllReduce",
                what, comm_);
    } else {
      reduceExact(static_cast<std::byte*>(data), dtype, count, op, s, what);
    }
    wait(s, what);
  }

  void allGather(const void* in, void* out, size_t bytes, void* stream, const std::string& what) override {
    usable(what);
    auto s = static_cast<cudaStream_t>(stream);
    refuseWhileCapturing(s, what);
    checkNccl(ncclAllGather(in, out, bytes, ncclUint8, comm_, s), "ncclAllGather", what, comm_);
    wait(s, what);
  }

 private:
  void usable(const std::string& what) const {
    if (!comm_)
      throw Error(what + ": the NCCL communicator was aborted by an earlier failure or timeout; make the pmap "
                         "(or the replica group) again to get a new one");
    check(cudaSetDevice(gpu_), "cudaSetDevice for NCCL");
  }

  // A collective waits for its stream on the host (wait() below), which a graph cannot hold:
  // while capturing it refuses before NCCL sees it, on every rank alike, and runs outside.
  static void refuseWhileCapturing(cudaStream_t s, const std::string& what) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check(cudaStreamIsCapturing(s, &status), "capture query (" + what + ")");
    if (status != cudaStreamCaptureStatusNone)
      throw CaptureBroken(what + ": an NCCL collective waits for its stream on the host, which a graph cannot hold");
  }

  // Rank j's slice of n elements: [n * j / N, n * (j + 1) / N), as in the MPI exact mode.
  void reduceExact(std::byte* data, DType dtype, int64_t n, Reduction op, cudaStream_t s, const std::string& what) {
    const int N = size(), me = rank();
    const size_t e = dtypeSize(dtype);
    auto begin = [&](int j) { return n * j / N; };
    const int64_t mine = begin(me + 1) - begin(me);
    void* rows = nullptr;  // row j: rank j's values of this rank's slice
    check(cudaMallocAsync(&rows, std::max<size_t>(1, size_t(N) * mine * e), s), "cudaMallocAsync (" + what + ")");
    auto* received = static_cast<std::byte*>(rows);
    checkNccl(ncclGroupStart(), "ncclGroupStart", what);
    for (int j = 0; j < N; ++j) {
      if (j == me) continue;
      checkNccl(ncclSend(data + begin(j) * e, size_t(begin(j + 1) - begin(j)), ncclType(dtype), j, comm_, s),
                "ncclSend", what, comm_);
      checkNccl(ncclRecv(received + size_t(j) * mine * e, size_t(mine), ncclType(dtype), j, comm_, s), "ncclRecv",
                what, comm_);
    }
    checkNccl(ncclGroupEnd(), "ncclGroupEnd", what, comm_);
    check(cudaMemcpyAsync(received + size_t(me) * mine * e, data + begin(me) * e, mine * e, cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync (" + what + ")");
    cuda::foldRows(received, N, mine, dtype, op, data + begin(me) * e, s);
    checkNccl(ncclGroupStart(), "ncclGroupStart", what);
    for (int j = 0; j < N; ++j) {
      if (j == me) continue;
      checkNccl(ncclSend(data + begin(me) * e, size_t(mine), ncclType(dtype), j, comm_, s), "ncclSend", what, comm_);
      checkNccl(ncclRecv(data + begin(j) * e, size_t(begin(j + 1) - begin(j)), ncclType(dtype), j, comm_, s),
                "ncclRecv", what, comm_);
    }
    checkNccl(ncclGroupEnd(), "ncclGroupEnd", what, comm_);
    check(cudaFreeAsync(rows, s), "cudaFreeAsync (" + what + ")");
  }

  // Waits for the stream, watching for NCCL errors, other replicas' failures and the timeout
  // (NCCL itself would wait forever for a rank that never comes).
  void wait(cudaStream_t s, const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      cudaError_t state = cudaStreamQuery(s);
      if (state == cudaSuccess) return;
      if (state != cudaErrorNotReady) check(state, what);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        std::string detail = ncclGetErrorString(async);
        abortNccl();
        throw Error(what + ": NCCL reported " + detail + " on rank " + std::to_string(rank()));
      }
      if (shared_->aborted) {
        abortNccl();
        throw ReplicaAborted(what + ": stopped because another replica failed");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        abortNccl();
        std::string message = what + " timed out after " + std::to_string(timeout_.count()) + " ms on NCCL rank " +
                              std::to_string(rank()) + " of " + std::to_string(size()) +
                              ": a replica never reached it (SPMD_COLLECTIVE_TIMEOUT sets the limit)";
        host_->abort(message);
        throw Error(message);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void abortNccl() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    shared_->aborted = true;
  }

  std::unique_ptr<Communicator> host_;
  ncclComm_t comm_;
  int gpu_;
  std::shared_ptr<Shared> shared_;
  std::chrono::milliseconds timeout_;
  ReduceMode mode_;
};

bool distinctGpus(const DeviceList& list) {
  for (int r = 0; r < list.size(); ++r)
    if (list.sharing(r) > 1) return false;
  return true;
}

}  // namespace

std::string ncclVersion(std::string* why) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) {
    if (why) *why = "ncclGetVersion failed";
    return "";
  }
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

bool useNccl(const DeviceList& list, int processes, std::string* why) {
  auto say = [&](bool use, const std::string& text) {
    if (why) *why = text;
    return use;
  };
  if (list.backend != "cuda") return say(false, "not cuda devices");
  if (!distinctGpus(list))
    return say(false, "several replicas share a GPU ('" + list.spec + "'), which NCCL refuses; the replicas "
                      "exchange device pointers instead" + std::string(processes > 1 ? " (not possible across "
                      "processes: give each replica its own GPU)" : ""));
  if (processes > 1) return say(true, "NCCL across " + std::to_string(processes) + " processes");
  if (list.size() > 1) return say(true, "NCCL across " + std::to_string(list.size()) + " GPUs of this process");
  return say(false, "one replica: no collective crosses a device");
}

std::vector<std::unique_ptr<Communicator>> makeNcclCommunicators(const DeviceList& list,
                                                                 std::vector<std::unique_ptr<Communicator>> host,
                                                                 const Job& job, std::chrono::milliseconds timeout) {
  const int K = list.size();
  if (K == 0 || int(host.size()) != K) throw Error("NCCL: one host communicator per replica expected");
  const int ranks = host[0]->size();
  const bool first = host[0]->rank() == 0;  // process 0 makes the id
  const std::string what = "NCCL setup for '" + list.spec + "'";
  std::vector<std::byte> id(sizeof(ncclUniqueId));
  if (first) {
    ncclUniqueId made;
    checkNccl(ncclGetUniqueId(&made), "ncclGetUniqueId", what);
    std::memcpy(id.data(), &made, sizeof made);
  }
  if (ranks > K) job.broadcast(id, "NCCL unique id");
  ncclUniqueId shared;
  std::memcpy(&shared, id.data(), sizeof shared);
  std::vector<ncclComm_t> comms(K, nullptr);
  int previous = 0;
  cudaGetDevice(&previous);
  checkNccl(ncclGroupStart(), "ncclGroupStart", what);
  for (int l = 0; l < K; ++l) {
    check(cudaSetDevice(list.devices[l]), "cudaSetDevice (" + what + ")");
    checkNccl(ncclCommInitRank(&comms[l], ranks, shared, host[l]->rank()), "ncclCommInitRank", what);
  }
  checkNccl(ncclGroupEnd(), "ncclGroupEnd (ncclCommInitRank of " + std::to_string(K) + " local ranks)", what);
  cudaSetDevice(previous);
  auto state = std::make_shared<Shared>();
  const ReduceMode mode = reduceModeFromEnvironment();
  std::vector<std::unique_ptr<Communicator>> out;
  for (int l = 0; l < K; ++l)
    out.push_back(std::make_unique<NcclCommunicator>(std::move(host[l]), comms[l], list.devices[l], state, timeout, mode));
  return out;
}

}  // namespace spmd::runtime
