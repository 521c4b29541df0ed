// CUDA reductions: one thread per output element walks its reduced elements (double
// accumulation, as the reference), and argmax along one axis. Correct for any axes; a tuned
// (block-per-output) version is future work, the ResNet step spends little time here.
#include <cfloat>

#include "runtime/NanRules.h"
#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime::cuda {
namespace {

constexpr int kMaxRank = 8;

// The input split into kept dims (indexed by the output element) and reduced dims.
struct Split {
  int kept, reduced;
  long long keptDims[kMaxRank], keptStrides[kMaxRank];
  long long reducedDims[kMaxRank], reducedStrides[kMaxRank];
  long long reducedCount;
};

Split split(const TensorView& x, const std::vector<int64_t>& axes) {
  if (x.rank() > static_cast<size_t>(kMaxRank))
    throw Error("CUDA reductions support rank <= 8, got rank " + std::to_string(x.rank()));
  Split s{0, 0, {}, {}, {}, {}, 1};
  std::vector<int64_t> strides(x.rank(), 1);
  for (size_t d = x.rank(); d-- > 1;) strides[d - 1] = strides[d] * x.dim(d);
  for (size_t d = 0; d < x.rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), int64_t(d)) != axes.end();
    if (reduced) {
      s.reducedDims[s.reduced] = x.dim(d), s.reducedStrides[s.reduced++] = strides[d];
      s.reducedCount *= x.dim(d);
    } else {
      s.keptDims[s.kept] = x.dim(d), s.keptStrides[s.kept++] = strides[d];
    }
  }
  return s;
}

// Offset of the index-th element of a row-major walk over `dims` laid out with `strides`.
__device__ long long offsetOf(const long long* dims, const long long* strides, int rank, long long index) {
  long long offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (index % dims[d]) * strides[d];
    index /= dims[d];
  }
  return offset;
}

// kind: 0 sum, 1 mean, 2 max
template <typename T>
__global__ void reduceKernel(const T* __restrict__ x, T* __restrict__ y, long long outputs, Split s, int kind) {
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < outputs; o += (long long)gridDim.x * blockDim.x) {
    long long base = offsetOf(s.keptDims, s.keptStrides, s.kept, o);
    double acc = kind == 2 ? -__longlong_as_double(0x7ff0000000000000LL) : 0.0;  // -inf for max
    for (long long r = 0; r < s.reducedCount; ++r) {
      double v = x[base + offsetOf(s.reducedDims, s.reducedStrides, s.reduced, r)];
      acc = kind == 2 ? nanMax(acc, v) : acc + v;
    }
    y[o] = static_cast<T>(kind == 1 ? acc / double(s.reducedCount) : acc);
  }
}

template <typename T>
__global__ void argmaxKernel(const T* __restrict__ x, int* __restrict__ y, long long outputs, Split s) {
  for (long long o = blockIdx.x * (long long)blockDim.x + threadIdx.x; o < outputs; o += (long long)gridDim.x * blockDim.x) {
    long long base = offsetOf(s.keptDims, s.keptStrides, s.kept, o);
    int best = 0;
    T bestValue = x[base];
    for (long long r = 1; r < s.reducedCount; ++r) {
      T v = x[base + r * s.reducedStrides[0]];
      if (argmaxTakes(v, bestValue)) bestValue = v, best = static_cast<int>(r);
    }
    y[o] = best;
  }
}

void reduce(KernelCall& call, int kind) {
  Split s = split(call.in[0], call.step.ints("axes"));
  int64_t outputs = call.out[0].numel();
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    reduceKernel<<<blocksFor(outputs), 256, 0, streamOf(call)>>>(call.in[0].as<T>(), call.out[0].as<T>(), outputs, s, kind);
  });
  checkLaunch(call);
}

}  // namespace

void reduce_sum(KernelCall& call) { reduce(call, 0); }
void reduce_mean(KernelCall& call) { reduce(call, 1); }
void reduce_max(KernelCall& call) { reduce(call, 2); }

void argmax(KernelCall& call) {
  Split s = split(call.in[0], {call.step.integer("axis")});
  int64_t outputs = call.out[0].numel();
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    argmaxKernel<<<blocksFor(outputs), 256, 0, streamOf(call)>>>(call.in[0].as<T>(), call.out[0].as<int>(), outputs, s);
  });
  checkLaunch(call);
}

}  // namespace spmd::runtime::cuda
