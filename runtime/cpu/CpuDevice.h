// The CPU backend's Device: host memory, kernels from runtime/cpu (oneDNN for conv, matmul and
// batch norm; plain C++ for the rest).
#pragma once

#include "runtime/device/Device.h"

namespace spmd::runtime {

const KernelTable& cpuKernels();

namespace cpu {
// Whether oneDNN runs bf16 convolutions and matmuls natively on this machine: an ISA with
// AVX512-BF16 (or AMX) within ONEDNN_MAX_CPU_ISA, and the primitives created; asked once.
// Elsewhere a bf16 step runs the f32 kernel between roundings (runtime/device/WidenedBf16.h).
bool onednnBf16();
// What onednnBf16() found, in words: which kernels run bf16 steps, and why.
const std::string& onednnBf16Path();
}  // namespace cpu

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(int index = 0) : index_(index) {}
  std::string name() const override { return "cpu:" + std::to_string(index_); }
  const KernelTable& kernels() const override { return cpuKernels(); }
  std::shared_ptr<std::byte> allocate(size_t bytes) override;
  bool hostAccessible() const override { return true; }
  int64_t channelBlock() const;  // what oneDNN's convolutions prefer on this ISA (0: plain)
  bool readsLayout(std::string_view layout) const override;  // plain, nChw8c and nChw16c
  void copyToDevice(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyToHost(std::byte* dst, const std::byte* src, size_t bytes) override;
  void copyOnDevice(std::byte* dst, const std::byte* src, size_t bytes) override;

 private:
  int index_;
};

}  // namespace spmd::runtime
