// CUDA collectives for replicas in one process (cuda:0*N, several replicas on one GPU, which
// NCCL refuses): every replica publishes a device pointer through the communicator, then each
// replica's kernel reduces its own slice of the elements over all replicas in rank order and
// writes the result into every replica's buffer (the CPU backend's algorithm, on the device, so
// results are the same bits on every replica). A combined all_reduce packs its operands into
// one flat device buffer first.
#include <vector>

#include "runtime/NanRules.h"
#include "runtime/Communicator.h"
#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime::cuda {
namespace {

constexpr int kMaxReplicas = 64;

struct Peers {
  void* data[kMaxReplicas];
};

// acc = buffers[0][i] op ... op buffers[N-1][i] for i in [begin, end), written to every buffer.
template <typename T, typename Acc>
__global__ void reduceSliceKernel(Peers peers, int replicas, long long begin, long long end, int op) {
  for (long long i = begin + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < end;
       i += (long long)gridDim.x * blockDim.x) {
    Acc acc = static_cast<const T*>(peers.data[0])[i];
    for (int r = 1; r < replicas; ++r) {
      Acc v = static_cast<const T*>(peers.data[r])[i];
      acc = op == 2 ? nanMax(acc, v) : op == 3 ? nanMin(acc, v) : acc + v;
    }
    if (op == 1) acc = acc / Acc(replicas);
    for (int r = 0; r < replicas; ++r) static_cast<T*>(peers.data[r])[i] = static_cast<T>(acc);
  }
}

std::string what(const KernelCall& call) { return call.step.op + " at " + call.step.location; }

int reductionCode(const std::string& name) {
  switch (parseReduction(name)) {
    case Reduction::Sum: return 0;
    case Reduction::Mean: return 1;
    case Reduction::Max: return 2;
    case Reduction::Min: return 3;
  }
  return 0;
}

// Reduces `count` elements at `data` (device memory of this replica) across the replicas.
void reduceInPlace(const KernelCall& call, void* data, DType dtype, int64_t count, int op) {
  Communicator& comm = communicatorOf(call);
  if (comm.size() > kMaxReplicas)
    throw Error(what(call) + ": at most " + std::to_string(kMaxReplicas) + " CUDA replicas per process");
  cudaStream_t stream = streamOf(call);
  check(cudaStreamSynchronize(stream), what(call));  // this replica's operand is ready
  std::vector<const void*> pointers = comm.exchange(data, what(call));
  Peers peers{};
  for (int r = 0; r < comm.size(); ++r) peers.data[r] = const_cast<void*>(pointers[r]);
  int64_t per = (count + comm.size() - 1) / comm.size();
  int64_t begin = std::min<int64_t>(count, per * comm.rank()), end = std::min<int64_t>(count, begin + per);
  if (end > begin) {
    if (dtype == DType::f32)
      reduceSliceKernel<float, double><<<blocksFor(end - begin), 256, 0, stream>>>(peers, comm.size(), begin, end, op);
    else if (dtype == DType::f64)
      reduceSliceKernel<double, double><<<blocksFor(end - begin), 256, 0, stream>>>(peers, comm.size(), begin, end, op);
    else
      reduceSliceKernel<int, long long><<<blocksFor(end - begin), 256, 0, stream>>>(peers, comm.size(), begin, end, op);
    checkLaunch(call);
  }
  check(cudaStreamSynchronize(stream), what(call));
  comm.barrier(what(call));  // every slice is written before anyone reads or reuses the buffers
}

void copy(const KernelCall& call, void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes)
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, streamOf(call)), what(call));
}

}  // namespace

void all_reduce(KernelCall& call) {
  int op = reductionCode(call.step.text("reduction"));
  DType dtype = call.in[0].dtype;
  if (call.in.size() == 1) {
    copy(call, call.out[0].data, call.in[0].data, call.in[0].numel() * dtypeSize(dtype));
    reduceInPlace(call, call.out[0].data, dtype, call.out[0].numel(), op);
    return;
  }
  int64_t total = 0;
  for (const TensorView& v : call.in) total += v.numel();
  if (!call.cache)
    call.cache = std::make_shared<std::shared_ptr<std::byte>>(deviceOf(call).allocate(total * dtypeSize(dtype)));
  std::byte* staging = static_cast<std::shared_ptr<std::byte>*>(call.cache.get())->get();
  size_t offset = 0;
  for (const TensorView& v : call.in) {
    copy(call, staging + offset, v.data, v.numel() * dtypeSize(dtype));
    offset += v.numel() * dtypeSize(dtype);
  }
  reduceInPlace(call, staging, dtype, total, op);
  offset = 0;
  for (const TensorView& v : call.out) {
    copy(call, v.data, staging + offset, v.numel() * dtypeSize(dtype));
    offset += v.numel() * dtypeSize(dtype);
  }
}

void all_gather(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  check(cudaStreamSynchronize(streamOf(call)), what(call));
  std::vector<const void*> sources = comm.exchange(call.in[0].data, what(call));
  for (int r = 0; r < comm.size(); ++r) copy(call, call.out[0].as<std::byte>() + r * bytes, sources[r], bytes);
  check(cudaStreamSynchronize(streamOf(call)), what(call));
  comm.barrier(what(call));  // inputs stay alive until every replica has copied them
}

// Sum over replicas of input[N, ...], keeping this replica's row (a full all-reduce of a copy).
void reduce_scatter(KernelCall& call) {
  Communicator& comm = communicatorOf(call);
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  if (!call.cache) call.cache = std::make_shared<std::shared_ptr<std::byte>>(deviceOf(call).allocate(bytes));
  std::byte* staging = static_cast<std::shared_ptr<std::byte>*>(call.cache.get())->get();
  copy(call, staging, call.in[0].data, bytes);
  reduceInPlace(call, staging, call.in[0].dtype, call.in[0].numel(), 0);
  size_t row = bytes / comm.size();
  copy(call, call.out[0].data, staging + comm.rank() * row, row);
}

void axis_index(KernelCall& call) {
  int rank = communicatorOf(call).rank();
  check(cudaMemcpyAsync(call.out[0].data, &rank, sizeof rank, cudaMemcpyHostToDevice, streamOf(call)), what(call));
  check(cudaStreamSynchronize(streamOf(call)), what(call));  // `rank` lives on this stack frame
}

}  // namespace spmd::runtime::cuda
