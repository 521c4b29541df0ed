// The CPU backend's convolution kernels as variants (runtime/device/Variants.h): per direction
// (conv2d, conv2d_backward_data, conv2d_backward_filter) spmd's Winograd (grouped and chunked),
// stride-2 GEMMs, the one-channel filter gradient, oneDNN's direct kernels and the reference
// loops for f64, each with where it runs and where it was found to pay. A step runs the one
// pinned, timed or first in order (runtime/cpu/ConvVariants.cpp).
#pragma once

#include <string>
#include <vector>

#include "runtime/device/Variants.h"

namespace spmd::runtime {
class ChoiceExchange;
}

namespace spmd::runtime::cpu {

// The variants of `op` (one of the three above); throws for another op.
const VariantSet& convVariants(const std::string& op);
// Every variant list of the CPU backend (spmd-run --kernels).
std::vector<const VariantSet*> cpuVariantSets();
// The executor's choice before a job's first call: the variant of a convolution step on the
// buffers `call` points at (bf16 steps that run in f32 choose on f32 copies).
void chooseConv(KernelCall& call, ChoiceExchange* exchange);

// oneDNN's direct convolutions (runtime/cpu/Conv.cpp, ConvBackward.cpp): f32, and bf16 where
// the ISA has oneDNN's bf16 kernels.
void onednnConv2d(KernelCall& call);
void onednnConv2dBackwardData(KernelCall& call);
void onednnConv2dBackwardFilter(KernelCall& call);

}  // namespace spmd::runtime::cpu
