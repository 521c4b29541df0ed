// CudaDevice: stream, library handles, memory and transfers of one GPU.
#include "runtime/cuda/CudaDevice.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <map>
#include <mutex>

#include "runtime/cuda/Cuda.h"

namespace spmd::runtime {

using cuda::check;

int cudaDeviceCount(std::string* why) {
  int count = 0;
  cudaError_t result = cudaGetDeviceCount(&count);
  if (result != cudaSuccess) {
    if (why) *why = std::string(cudaGetErrorName(result)) + ": " + cudaGetErrorString(result);
    cudaGetLastError();  // clear it
    return 0;
  }
  if (count == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return count;
}

std::string cudaBf16Blocker() {
  std::string why;
  const int count = cudaDeviceCount(&why);
  if (count == 0) return "no GPU (" + why + ")";
  for (int i = 0; i < count; ++i) {
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i) != cudaSuccess) {
      cudaGetLastError();  // clear it
      return "GPU " + std::to_string(i) + "'s compute capability could not be read";
    }
    if (major < 8)
      return "GPU " + std::to_string(i) + " is sm_" + std::to_string(major) + std::to_string(minor) +
             "; cuDNN's and cuBLAS's bf16 kernels need sm_80 or later";
  }
  return "";
}

CudaDevice::CudaDevice(int index, int replica) : index_(index), replica_(replica) {
  check(cudaSetDevice(index), "cudaSetDevice(" + std::to_string(index) + ")");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream creation on " + name());
  stream_ = stream;
  cudaDeviceProp props;
  check(cudaGetDeviceProperties(&props, index), "device query");
  arch_ = "sm_" + std::to_string(props.major) + std::to_string(props.minor);
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) throw Error("cuBLAS could not start on " + name());
  cublasSetStream(blas, stream);  // before the workspace: setting a stream resets it
  cublas_ = blas;
  // cuBLAS's own workspace, given so that a GEMM never allocates (an allocation inside a graph
  // capture becomes a node that keeps the graph from being cut at a step).
  blasWorkspace_ = allocate(kBlasWorkspaceBytes);
  if (cublasSetWorkspace(blas, blasWorkspace_.get(), kBlasWorkspaceBytes) != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLAS refused its workspace on " + name());
  cudnnHandle_t dnn;
  if (cudnnCreate(&dnn) != CUDNN_STATUS_SUCCESS) throw Error("cuDNN could not start on " + name());
  cudnnSetStream(dnn, stream);
  cudnn_ = dnn;
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(index_);
  if (stream_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  workspace_.reset();
  if (cudnn_) cudnnDestroy(static_cast<cudnnHandle_t>(cudnn_));
  if (cublas_) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

std::string CudaDevice::name() const {
  return "cuda:" + std::to_string(index_) + (replica_ >= 0 ? "#" + std::to_string(replica_) : "");
}

// Freed blocks of up to kPooledBytes by rounded size, at most kPoolBytes in all; the rest go back
// with cudaFree. Every block is used on its device's one stream, so reuse is ordered after the
// work queued on the old one. Shared with the deleters, so it outlives buffers that outlive the
// device; freed (cudaFree) when the last of them goes.
struct BlockPool {
  static constexpr size_t kPooledBytes = size_t(1) << 20, kPoolBytes = size_t(64) << 20;
  int device = 0;
  std::mutex mutex;
  std::multimap<size_t, void*> free;
  size_t kept = 0;
  static size_t rounded(size_t bytes) { return bytes <= 256 ? 256 : (bytes + 511) / 512 * 512; }
  void* take(size_t size) {
    std::lock_guard lock(mutex);
    auto it = free.find(size);
    if (it == free.end()) return nullptr;
    void* p = it->second;
    free.erase(it);
    kept -= size;
    return p;
  }
  // Keeps `p` when it is small and the pool has room; false: the caller frees it.
  bool give(void* p, size_t size) {
    std::lock_guard lock(mutex);
    if (size > kPooledBytes || kept + size > kPoolBytes) return false;
    free.emplace(size, p), kept += size;
    return true;
  }
  void release() {
    std::lock_guard lock(mutex);
    cudaSetDevice(device);
    for (auto& [size, p] : free) cudaFree(p);
    free.clear(), kept = 0;
  }
  ~BlockPool() { release(); }
};

std::shared_ptr<std::byte> CudaDevice::allocate(size_t bytes) {
  refuseWhileCapturing("an allocation");
  if (!pool_) pool_ = std::make_shared<BlockPool>(), pool_->device = index_;
  const size_t size = BlockPool::rounded(bytes);
  void* memory = size <= BlockPool::kPooledBytes ? pool_->take(size) : nullptr;
  check(cudaSetDevice(index_), "cudaSetDevice");
  cudaError_t result = memory ? cudaSuccess : cudaMalloc(&memory, size);
  if (result == cudaErrorMemoryAllocation) {  // the pool's blocks back to the device, and once more
    cudaGetLastError();
    pool_->release();
    result = cudaMalloc(&memory, size);
  }
  if (result != cudaSuccess) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw Error(name() + ": out of GPU memory allocating " + std::to_string(bytes) + " bytes (" +
                std::to_string(free >> 20) + " MiB free of " + std::to_string(total >> 20) +
                " MiB); use a smaller batch or fewer replicas per GPU");
  }
  int device = index_;
  return {static_cast<std::byte*>(memory), [device, size, pool = pool_](std::byte* p) {
            if (pool->give(p, size)) return;
            cudaSetDevice(device);
            cudaFree(p);
          }};
}

void CudaDevice::copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) {
  refuseWhileCapturing("a copy from host memory");
  countToDevice(bytes);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_)),
        "copy to " + name());
}

void CudaDevice::copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) {
  if (dst == src || bytes == 0) return;
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream_)),
        "copy on " + name());
}

void CudaDevice::copyToHost(std::byte* dst, const std::byte* src, size_t bytes) {
  refuseWhileCapturing("a copy to host memory");
  countToHost(bytes);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream_)),
        "copy from " + name());
  synchronize();
}

void CudaDevice::synchronize() {
  refuseWhileCapturing("a wait for the stream");
  countHostWait();
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)), "work on " + name());
}

namespace {

class CudaClock final : public DeviceClock {
 public:
  CudaClock(int index, void* stream) : index_(index), stream_(static_cast<cudaStream_t>(stream)) {}
  ~CudaClock() override {
    cudaSetDevice(index_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  void mark() override {
    cudaEvent_t e;
    check(cudaEventCreate(&e), "event creation on cuda:" + std::to_string(index_));
    events_.push_back(e);
    check(cudaEventRecord(e, stream_), "event record on cuda:" + std::to_string(index_));
  }
  std::vector<double> seconds() override {
    std::vector<double> out;
    for (cudaEvent_t e : events_) {
      float ms = 0;
      check(cudaEventElapsedTime(&ms, events_.front(), e), "event timing on cuda:" + std::to_string(index_));
      out.push_back(double(ms) * 1e-3);
    }
    return out;
  }

 private:
  int index_;
  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

std::unique_ptr<DeviceClock> CudaDevice::clock() { return std::make_unique<CudaClock>(index_, stream_); }

void CudaDevice::activate() { check(cudaSetDevice(index_), "cudaSetDevice(" + std::to_string(index_) + ")"); }

void* CudaDevice::workspace(size_t bytes) {
  if (bytes > workspaceBytes_) {
    synchronize();  // the old workspace may still be in use by queued work
    workspace_ = allocate(bytes);
    workspaceBytes_ = bytes;
  }
  return workspace_.get();
}

}  // namespace spmd::runtime
