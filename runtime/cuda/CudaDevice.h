// The CUDA backend's Device: one GPU (or one replica's share of it, for cuda:0*N). Memory from
// cudaMalloc, work on the device's own stream, cuBLAS and cuDNN handles bound to that stream,
// kernels from runtime/cuda. Its stream captures graphs (runtime/cuda/Capture.cpp). No CUDA
// header here: users of the runtime need none.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device/Device.h"
#include "runtime/program/Layouts.h"

namespace spmd::runtime {

const KernelTable& cudaKernels();

// How many GPUs the CUDA runtime sees; 0 with `why` set when there is none or no driver.
int cudaDeviceCount(std::string* why = nullptr);
// "" when every visible GPU runs cuDNN's and cuBLAS's bf16 kernels (sm_80 or later), else why not.
std::string cudaBf16Blocker();

class CudaDevice final : public Device, public GraphCapture {
 public:
  // `replica` tells replicas sharing one GPU apart in names ("cuda:0#1").
  explicit CudaDevice(int index, int replica = -1);
  ~CudaDevice() override;
  std::string name() const override;
  const KernelTable& kernels() const override { return cudaKernels(); }
  // cudaMalloc; blocks of up to 1 MiB come back to a pool when freed and serve the next
  // allocation of their size, so a step's small outputs (the loss) neither wait on cudaFree (which
  // synchronises the device) nor move between calls.
  std::shared_ptr<std::byte> allocate(size_t bytes) override;
  bool hostAccessible() const override { return false; }
  int cudaOrdinal() const override { return index_; }
  bool readsLayout(std::string_view layout) const override { return layout.empty() || layout == kChannelsLast; }
  void copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyToHost(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) override;
  void synchronize() override;
  void activate() override;
  GraphCapture* graphs() override { return this; }
  // CUDA events recorded on the stream.
  std::unique_ptr<DeviceClock> clock() override;
  // Stream capture (cudaStreamBeginCapture, thread-local mode). A wait for the stream, a copy
  // between host and device or an allocation while this thread captures throws CaptureBroken
  // before CUDA sees it, so the capture stays valid and the executor runs that step outside.
  void begin() override;
  size_t recorded() const override;  // nodes in the graph being captured
  std::shared_ptr<const Graph> end(size_t keep) override;
  void launch(const Graph& graph) override;
  void refuseWhileCapturing(const std::string& what) const;

  int index() const { return index_; }
  void* stream() const { return stream_; }  // cudaStream_t
  void* cublas() const { return cublas_; }  // cublasHandle_t
  void* cudnn() const { return cudnn_; }    // cudnnHandle_t
  std::string arch() const { return arch_; }  // "sm_90", for NVRTC
  // Scratch memory for library calls (cuDNN workspaces, a bf16 GEMM's f32 result), grown on
  // demand (outside a capture) and kept; a graph keeps the one it was captured with.
  void* workspace(size_t bytes);

 private:
  int index_, replica_;
  void* stream_ = nullptr;
  void* cublas_ = nullptr;
  void* cudnn_ = nullptr;
  std::string arch_;
  std::shared_ptr<std::byte> workspace_;
  size_t workspaceBytes_ = 0;
  // cuBLAS's: 32 MiB, what cuBLAS itself takes on Hopper.
  static constexpr size_t kBlasWorkspaceBytes = size_t(32) << 20;
  std::shared_ptr<std::byte> blasWorkspace_;
  mutable std::vector<void*> marked_;  // the capture's nodes at the last recorded() (cudaGraphNode_t)
  // Small blocks given back, kept for the next allocation of their size (BlockPool in the .cpp).
  std::shared_ptr<struct BlockPool> pool_;
};

}  // namespace spmd::runtime
