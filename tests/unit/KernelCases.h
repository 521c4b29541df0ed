// The kernel cases every backend is checked on against the reference kernels: each op on random
// inputs (several shapes, odd sizes, f32 or f64), with the attributes the compiler would give.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "TestUtil.h"
#include "runtime/device/Device.h"
#include "runtime/device/Kernel.h"
#include "runtime/device/KernelChoice.h"
#include "runtime/program/Program.h"

namespace spmd::runtime {

struct KernelCase {
  std::string name;  // shown in failures
  std::string op;
  std::vector<Array> inputs;
  std::vector<std::pair<DType, Shape>> outputs;
  std::map<std::string, Attr> attrs = {};
  // Memory layouts of the inputs, then the outputs (runtime/program/Layouts.h); empty: all plain.
  // Inputs are given and outputs compared in plain NCHW: the harness relays them through the
  // reference relayout, so the reference kernels (plain only) remain the oracle.
  std::vector<std::string> layouts = {};
  // The f64 outputs' tolerance against the reference (relative and absolute); a case whose
  // conditioning amplifies rounding states its own.
  double f64Tolerance = 1e-12;

  const std::string& layout(size_t i) const {
    static const std::string plain;
    return i < layouts.size() ? layouts[i] : plain;
  }
  // Whether `device` reads every layout the case gives its buffers (Device::readsLayout).
  bool readBy(const Device& device) const {
    return std::all_of(layouts.begin(), layouts.end(), [&](const std::string& l) { return device.readsLayout(l); });
  }
};

// `a` copied from layout `from` to layout `to` by the reference relayout.
Array relaid(const Array& a, const std::string& from, const std::string& to);
// The case's inputs in their layouts, and outputs back from theirs.
std::vector<Array> inputsInLayout(const KernelCase& c);
void outputsToPlain(const KernelCase& c, std::vector<Array>& outputs);
// The case with every buffer plain: what the reference kernels run.
KernelCase plainCase(KernelCase c);
// The case as a one-step Program (its inputs and outputs the function's), for executors.
Program oneStepProgram(const KernelCase& c, const std::string& location);
// Outputs filled with NaN (floats) or -12345 (i32), so a kernel that skips an element is seen.
Array poisoned(DType dtype, const Shape& shape);

// Kernel variants pinned (SPMD_KERNELS's text) for the guard's lifetime, the process's pins restored after.
class PinnedKernels {
 public:
  explicit PinnedKernels(const std::string& pins) : previous_(KernelChoices::process().pins()) {
    KernelChoices::process().setPins(pins);
  }
  ~PinnedKernels() { KernelChoices::process().setPins(previous_); }

 private:
  std::string previous_;
};

// Runs a case's kernel from `table` twice on host memory (outputs poisoned first) and returns
// the outputs of the second call, which reuses the cached state. `variant`: where a kernel with
// variants writes which one it ran and why.
std::vector<Array> runKernel(const KernelTable& table, const KernelCase& c, std::string* variant = nullptr);

// Every kernel case of dtype `t` (f32 or f64), inputs drawn from fixed seeds. Defined in
// KernelCases.cpp, compiled once: the list is large, and compiling it in every suite that runs
// it cost each of them ~20 s (and more under the sanitizers).
std::vector<KernelCase> kernelCases(DType t);
// The channels-last cases ("nhwc", the CUDA backend's layout with SPMD_CHANNELS_LAST=1), any
// channel count: batch norm (masked too: a mask entry covers H*W rows) and its backward, a fused
// body broadcasting plain inputs, convolutions in both layouts (the stem's plain input into an
// nhwc result, a filter gradient of a plain input), relayouts both ways. Backends that do not
// read the layout (cpu) refuse their programs.
std::vector<KernelCase> channelsLastCases(DType t);
// Both lists: what the suites that run every backend's executor run (ConformanceTest, CudaKernelTest).
std::vector<KernelCase> everyKernelCase(DType t);

// Whether a case is a convolution our own variants and the CUDA backend's GEMM variant compute:
// neither dilated nor grouped (ConvView::plain).
inline bool plainConvolution(const KernelCase& c) {
  return c.op.rfind("conv2d", 0) == 0 && !c.attrs.count("dilation") && !c.attrs.count("groups");
}

}  // namespace spmd::runtime
