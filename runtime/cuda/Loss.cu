// CUDA softmax cross-entropy and its backward: one thread per row (10 classes in the flagship
// model), double accumulation as the reference. A label out of range is recorded on the device
// and reported as the same error the CPU backend gives, after the step's row is known.
#include <memory>

#include "runtime/cuda/Cuda.h"
#include "runtime/cuda/Kernels.h"

namespace spmd::runtime::cuda {
namespace {

template <typename T>
__device__ double logSumExp(const T* row, long long classes) {
  double top = row[0];
  for (long long c = 1; c < classes; ++c) top = row[c] > top ? double(row[c]) : top;
  double sum = 0;
  for (long long c = 0; c < classes; ++c) sum += ::exp(double(row[c]) - top);
  return top + ::log(sum);
}

// bad[0]: first bad row + 1 (0: none); bad[1]: its label.
template <typename T>
__global__ void lossKernel(const T* logits, const int* labels, T* loss, long long rows, long long classes, int* bad) {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    int label = labels[r];
    if (label < 0 || label >= classes) {
      if (atomicCAS(bad, 0, int(r) + 1) == 0) bad[1] = label;
      loss[r] = T(0);
      continue;
    }
    const T* row = logits + r * classes;
    loss[r] = static_cast<T>(logSumExp(row, classes) - double(row[label]));
  }
}

template <typename T>
__global__ void lossBackwardKernel(const T* logits, const int* labels, const T* dloss, T* dlogits,
                                   long long rows, long long classes, int* bad) {
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    int label = labels[r];
    if (label < 0 || label >= classes) {
      if (atomicCAS(bad, 0, int(r) + 1) == 0) bad[1] = label;
      continue;
    }
    const T* row = logits + r * classes;
    double lse = logSumExp(row, classes);
    for (long long c = 0; c < classes; ++c)
      dlogits[r * classes + c] = static_cast<T>((::exp(double(row[c]) - lse) - (c == label ? 1.0 : 0.0)) * double(dloss[r]));
  }
}

// Device flag + pinned host copy, kept in the step's cache.
struct LabelCheck {
  std::shared_ptr<std::byte> flag;
  int host[2] = {0, 0};
};

LabelCheck& labelCheck(KernelCall& call) {
  if (!call.cache) {
    auto check = std::make_shared<LabelCheck>();
    check->flag = deviceOf(call).allocate(2 * sizeof(int));
    call.cache = check;
  }
  return *static_cast<LabelCheck*>(call.cache.get());
}

// Resets the step's label flag, runs `launch(flag)` on the stream, waits for the step and
// throws the CPU backend's message for the first bad label.
template <typename Launch>
void withLabelCheck(KernelCall& call, Launch launch) {
  LabelCheck& lc = labelCheck(call);
  int* flag = reinterpret_cast<int*>(lc.flag.get());
  check(cudaMemsetAsync(flag, 0, 2 * sizeof(int), streamOf(call)), "label check reset");
  launch(flag);
  checkLaunch(call);
  check(cudaMemcpyAsync(lc.host, flag, sizeof lc.host, cudaMemcpyDeviceToHost, streamOf(call)), "label check");
  check(cudaStreamSynchronize(streamOf(call)), "label check");
  if (lc.host[0] != 0) checkLabel(lc.host[1], lc.host[0] - 1, call.in[0].dim(1));
}

}  // namespace

void softmax_cross_entropy(KernelCall& call) {
  int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  withLabelCheck(call, [&](int* flag) {
    visitFloat(call.in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      lossKernel<<<blocksFor(rows, 128), 128, 0, streamOf(call)>>>(call.in[0].as<T>(), call.in[1].as<int>(),
                                                                  call.out[0].as<T>(), rows, classes, flag);
    });
  });
}

void softmax_cross_entropy_backward(KernelCall& call) {
  int64_t rows = call.in[0].dim(0), classes = call.in[0].dim(1);
  withLabelCheck(call, [&](int* flag) {
    visitFloat(call.in[0].dtype, [&](auto tag) {
      using T = decltype(tag);
      lossBackwardKernel<<<blocksFor(rows, 128), 128, 0, streamOf(call)>>>(
          call.in[0].as<T>(), call.in[1].as<int>(), call.in[2].as<T>(), call.out[0].as<T>(), rows, classes, flag);
    });
  });
}

}  // namespace spmd::runtime::cuda
