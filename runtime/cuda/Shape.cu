// CUDA shape kernels: broadcast_in_dim and transpose as one strided gather (result index ->
// source offset), reshape as a device-to-device copy. Any element type (by size).
#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime::cuda {
namespace {

constexpr int kMaxRank = 8;

struct Gather {
  int rank;
  long long dims[kMaxRank];     // result shape
  long long strides[kMaxRank];  // source element stride per result dim (0: broadcast)
};

template <typename T>
__global__ void gatherKernel(const T* __restrict__ x, T* __restrict__ y, long long n, Gather g) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long rest = i, from = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
      from += (rest % g.dims[d]) * g.strides[d];
      rest /= g.dims[d];
    }
    y[i] = x[from];
  }
}

void gather(KernelCall& call, const Gather& g) {
  int64_t n = call.out[0].numel();
  auto s = streamOf(call);
  if (dtypeSize(call.in[0].dtype) == 8)
    gatherKernel<<<blocksFor(n), 256, 0, s>>>(call.in[0].as<long long>(), call.out[0].as<long long>(), n, g);
  else
    gatherKernel<<<blocksFor(n), 256, 0, s>>>(call.in[0].as<int>(), call.out[0].as<int>(), n, g);
  checkLaunch(call);
}

Gather resultShape(const TensorView& y) {
  if (y.rank() > static_cast<size_t>(kMaxRank))
    throw Error("CUDA shape kernels support rank <= 8, got rank " + std::to_string(y.rank()));
  Gather g{static_cast<int>(y.rank()), {}, {}};
  for (size_t d = 0; d < y.rank(); ++d) g.dims[d] = y.dim(d);
  return g;
}

std::vector<int64_t> rowMajor(const TensorView& x) {
  std::vector<int64_t> strides(x.rank(), 1);
  for (size_t d = x.rank(); d-- > 1;) strides[d - 1] = strides[d] * x.dim(d);
  return strides;
}

}  // namespace

void broadcast_in_dim(KernelCall& call) {
  const auto& dims = call.step.ints("dims");
  Gather g = resultShape(call.out[0]);
  std::vector<int64_t> strides = rowMajor(call.in[0]);
  for (size_t i = 0; i < dims.size(); ++i)
    if (call.in[0].dim(i) != 1) g.strides[dims[i]] = strides[i];
  gather(call, g);
}

void transpose(KernelCall& call) {
  const auto& perm = call.step.ints("perm");
  Gather g = resultShape(call.out[0]);
  std::vector<int64_t> strides = rowMajor(call.in[0]);
  for (size_t i = 0; i < perm.size(); ++i) g.strides[i] = strides[perm[i]];
  gather(call, g);
}

void reshape(KernelCall& call) {
  size_t bytes = call.in[0].numel() * dtypeSize(call.in[0].dtype);
  if (call.out[0].data != call.in[0].data)
    check(cudaMemcpyAsync(call.out[0].data, call.in[0].data, bytes, cudaMemcpyDeviceToDevice, streamOf(call)),
          "reshape copy");
}

}  // namespace spmd::runtime::cuda
