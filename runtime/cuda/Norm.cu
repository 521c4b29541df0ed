// CUDA batch normalization (training, inference, backward) over N and the spatial dims per
// channel: one block per channel reduces in double (block-wide tree), then a grid-stride pass
// applies. Our own kernels rather than cuDNN's because the dialect returns the biased batch
// variance (cuDNN returns the inverse standard deviation and updates running stats itself).
#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/NormLaunch.h"

namespace spmd::runtime::cuda {
namespace {

constexpr int kThreads = kNormThreads;

struct Layout {
  long long outer, channels, inner;  // x viewed as [N, C, H*W]
};

Layout layoutOf(const TensorView& x) { return {x.dim(0), x.dim(1), x.numel() / (x.dim(0) * x.dim(1))}; }

// Element k (of N * H*W) of channel c.
__device__ long long at(const Layout& l, long long c, long long k) {
  return ((k / l.inner) * l.channels + c) * l.inner + k % l.inner;
}

__device__ double blockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width) shared[threadIdx.x] += shared[threadIdx.x + width];
    __syncthreads();
  }
  double total = shared[0];
  __syncthreads();
  return total;
}

// Per channel (blockIdx.x): mean and biased variance (two passes, as the reference).
template <typename T>
__global__ void statsKernel(const T* __restrict__ x, T* mean, T* var, Layout l, double* dmean, double* dvar) {
  __shared__ double shared[kThreads];
  long long c = blockIdx.x, count = l.outer * l.inner;
  double sum = 0;
  for (long long k = threadIdx.x; k < count; k += kThreads)
    sum += x[at(l, c, k)];
  double m = blockSum(sum, shared) / double(count);
  double sq = 0;
  for (long long k = threadIdx.x; k < count; k += kThreads) {
    double d = x[at(l, c, k)] - m;
    sq += d * d;
  }
  double v = blockSum(sq, shared) / double(count);
  if (threadIdx.x == 0) {
    mean[c] = static_cast<T>(m), var[c] = static_cast<T>(v);
    dmean[c] = m, dvar[c] = v;
  }
}

// y = (x - mean) / sqrt(var + eps) * scale + offset, statistics in double when given.
template <typename T, typename S>
__global__ void applyKernel(const T* __restrict__ x, T* __restrict__ y, const T* scale, const T* offset,
                            const S* mean, const S* var, double eps, Layout l) {
  long long n = l.outer * l.channels * l.inner;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long c = (i / l.inner) % l.channels;
    double inv = 1.0 / ::sqrt(double(var[c]) + eps);
    y[i] = static_cast<T>((double(x[i]) - double(mean[c])) * inv * double(scale[c]) + double(offset[c]));
  }
}

// Per channel: dscale = sum(dy * xhat), doffset = sum(dy); then
// dx = scale * rstd / M * (M dy - doffset - xhat dscale).
template <typename T>
__global__ void backwardSumsKernel(const T* dy, const T* x, const T* mean, const T* var, double eps, Layout l,
                                   T* dscale, T* doffset, double* sums) {
  __shared__ double shared[kThreads];
  long long c = blockIdx.x, count = l.outer * l.inner;
  double rstd = 1.0 / ::sqrt(double(var[c]) + eps), s1 = 0, s2 = 0;
  for (long long k = threadIdx.x; k < count; k += kThreads) {
    long long i = at(l, c, k);
    s1 += double(dy[i]) * (double(x[i]) - double(mean[c])) * rstd;
    s2 += double(dy[i]);
  }
  double ds = blockSum(s1, shared), dof = blockSum(s2, shared);
  if (threadIdx.x == 0) {
    dscale[c] = static_cast<T>(ds), doffset[c] = static_cast<T>(dof);
    sums[2 * c] = ds, sums[2 * c + 1] = dof;
  }
}

template <typename T>
__global__ void backwardApplyKernel(const T* dy, const T* x, const T* scale, const T* mean, const T* var,
                                    double eps, Layout l, const double* sums, T* dx) {
  long long n = l.outer * l.channels * l.inner;
  double count = double(l.outer * l.inner);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long c = (i / l.inner) % l.channels;
    double rstd = 1.0 / ::sqrt(double(var[c]) + eps);
    double xhat = (double(x[i]) - double(mean[c])) * rstd;
    double k = double(scale[c]) * rstd / count;
    dx[i] = static_cast<T>(k * (count * double(dy[i]) - sums[2 * c + 1] - xhat * sums[2 * c]));
  }
}

// Double-precision per-channel scratch kept in the step's cache.
double* scratch(KernelCall& call, size_t doubles) {
  if (!call.cache) call.cache = std::make_shared<std::shared_ptr<std::byte>>(deviceOf(call).allocate(doubles * sizeof(double)));
  return reinterpret_cast<double*>(static_cast<std::shared_ptr<std::byte>*>(call.cache.get())->get());
}

}  // namespace

// inputs: x, scale, offset; outputs: y, batch mean, batch variance (biased)
void batch_norm_train(KernelCall& call) {
  Layout l = layoutOf(call.in[0]);
  double eps = call.step.real("epsilon");
  double* stats = scratch(call, 2 * l.channels);
  auto s = streamOf(call);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const kernels::Launch channel = checked(normChannelLaunch("statsKernel", l.channels, l.outer * l.inner), call);
    const kernels::Launch apply = checked(kernels::gridStride("applyKernel", call.in[0].numel()), call);
    statsKernel<<<unsigned(channel.blocks), channel.threads, 0, s>>>(call.in[0].as<T>(), call.out[1].as<T>(),
                                                                   call.out[2].as<T>(), l, stats, stats + l.channels);
    applyKernel<<<unsigned(apply.blocks), apply.threads, 0, s>>>(call.in[0].as<T>(), call.out[0].as<T>(),
                                                              call.in[1].as<T>(), call.in[2].as<T>(),
                                                              (const double*)stats, (const double*)stats + l.channels, eps, l);
  });
  checkLaunch(call);
}

// inputs: x, scale, offset, mean, variance
void batch_norm_infer(KernelCall& call) {
  Layout l = layoutOf(call.in[0]);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const kernels::Launch apply = checked(kernels::gridStride("applyKernel", call.in[0].numel()), call);
    applyKernel<<<unsigned(apply.blocks), apply.threads, 0, streamOf(call)>>>(
        call.in[0].as<T>(), call.out[0].as<T>(), call.in[1].as<T>(), call.in[2].as<T>(), call.in[3].as<T>(),
        call.in[4].as<T>(), call.step.real("epsilon"), l);
  });
  checkLaunch(call);
}

// inputs: result_grad, input, scale, batch_mean, batch_variance; outputs: dx, dscale, doffset
void batch_norm_train_backward(KernelCall& call) {
  Layout l = layoutOf(call.in[1]);
  double eps = call.step.real("epsilon");
  double* sums = scratch(call, 2 * l.channels);
  auto s = streamOf(call);
  visitFloat(call.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *dy = call.in[0].as<T>(), *x = call.in[1].as<T>(), *scale = call.in[2].as<T>();
    const T *mean = call.in[3].as<T>(), *var = call.in[4].as<T>();
    const kernels::Launch reduce = checked(normChannelLaunch("backwardSumsKernel", l.channels, l.outer * l.inner), call);
    const kernels::Launch apply = checked(kernels::gridStride("backwardApplyKernel", call.in[0].numel()), call);
    backwardSumsKernel<<<unsigned(reduce.blocks), reduce.threads, 0, s>>>(dy, x, mean, var, eps, l, call.out[1].as<T>(),
                                                                          call.out[2].as<T>(), sums);
    backwardApplyKernel<<<unsigned(apply.blocks), apply.threads, 0, s>>>(dy, x, scale, mean, var, eps, l, sums,
                                                                         call.out[0].as<T>());
  });
  checkLaunch(call);
}

}  // namespace spmd::runtime::cuda
