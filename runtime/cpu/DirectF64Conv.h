// f64 convolutions on the CPU (oneDNN has no f64): direct loops, each output's sum taken in the
// reference loops' order (runtime/reference/Conv*.cpp), vectorized across channels and threaded
// across images and channel blocks. Every output is one lane's sequence of multiplies and adds
// in that order (no contraction: this file builds with -ffp-contract=off), so the results are
// the reference kernels' bits on every ISA copy (cpu/OwnIsa.h) and thread count, taps outside
// the image skipped as the reference skips them (no 0 * inf, no +0 for a -0 sum).
// ResNet-18 at full width, batch 8, one f64 training step's convolutions on 2 cores: 22.0 s in
// the reference loops, 0.97 s here (SPMD_PROFILE=1 of TorchReferenceTest's f64 step); the whole
// step 0.19x PyTorch's f64 time (2026-12-01, AMD EPYC Zen 4; benchmarks/compare_resnet18_train_step.py
// --dtype f64).
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::direct_f64 {

// Whether the step runs here: f64, 4-D operands in the plain layout (the only one f64 gets).
bool runs(const KernelCall& call);

// inputs: x [N, C, H, W], filter [O, C, KH, KW], optional bias [O]; output: y [N, O, OH, OW]
// (with relu: max(0, y) by the relu op's NaN rules). Lanes over output channels.
void forward(KernelCall& call);
// inputs: result_grad [N, O, OH, OW], filter; output: input_grad [N, C, H, W]. Lanes over input
// channels; each input's sum over output channels, then rows, then columns, as the reference.
void backwardData(KernelCall& call);
// inputs: x, result_grad; output: filter_grad [O, C, KH, KW]. Lanes over input channels; each
// tap's sum over images, then rows, then columns, as the reference.
void backwardFilter(KernelCall& call);

}  // namespace spmd::runtime::cpu::direct_f64
