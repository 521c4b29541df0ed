// The CPU backend's kernels with variants (runtime/device/Variants.h): per convolution direction
// (conv2d, conv2d_backward_data, conv2d_backward_filter) spmd's Winograd (grouped and chunked),
// stride-2 GEMMs, the one-channel filter gradient, oneDNN's direct kernels, oneDNN on fixed
// one-thread slices (runtime/cpu/SlicedOnednn.h) and the reference loops for f64; and matmul
// (oneDNN, sliced, reference). Each says where it runs, where it was found to pay and whether
// its bits depend on the thread count. A step runs the one pinned, timed or first in order
// (runtime/cpu/CpuVariants.cpp).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "runtime/device/Variants.h"

namespace spmd::runtime {
class ChoiceExchange;
}

namespace spmd::runtime::cpu {

// The variants of `op` (one of the four above); throws for another op.
const VariantSet& cpuVariants(const std::string& op);
// Every variant list of the CPU backend (spmd-run --kernels).
std::vector<const VariantSet*> cpuVariantSets();
// The executor's choice before a job's first call: the variant of a step with variants on the
// buffers `call` points at (bf16 steps that run in f32 choose on f32 copies).
void chooseCpuVariant(KernelCall& call, ChoiceExchange* exchange);

// The CPU kind a timed choice holds for, from /proc/cpuinfo's text (its first processor): the
// model name and the family and model numbers, "AMD EPYC (family 23 model 49)". The numbers tell
// apart what a hypervisor names alike: Zen 2 and Zen 3 were both "AMD EPYC", with AVX2 alone,
// so one's timed choices ran on the other from a shared kernel cache. "unknown CPU" without a
// model name; the name alone without the numbers.
std::string cpuKind(std::istream& cpuinfo);

// oneDNN's direct convolutions (runtime/cpu/Conv.cpp, ConvBackward.cpp): f32, and bf16 where
// the ISA has oneDNN's bf16 kernels.
void onednnConv2d(KernelCall& call);
void onednnConv2dBackwardData(KernelCall& call);
void onednnConv2dBackwardFilter(KernelCall& call);
// oneDNN's matmul (runtime/cpu/Dense.cpp), f32 and bf16 likewise.
void onednnMatmul(KernelCall& call);

}  // namespace spmd::runtime::cpu
