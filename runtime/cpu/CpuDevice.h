// The CPU backend's Device: host memory, kernels from runtime/cpu (oneDNN for conv, matmul and
// batch norm; plain C++ for the rest).
#pragma once

#include "runtime/device/Device.h"

namespace spmd::runtime {

const KernelTable& cpuKernels();

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int index = 0) : index_(index) {}
  std::string name() const override { return "cpu:" + std::to_string(index_); }
  const KernelTable& kernels() const override { return cpuKernels(); }
  std::shared_ptr<std::byte> allocate(size_t bytes) override;
  bool hostAccessible() const override { return true; }
  int64_t channelBlock() const override;  // what oneDNN's convolutions prefer on this ISA
  void copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyToHost(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) override;

 private:
  int index_;
};

}  // namespace spmd::runtime
