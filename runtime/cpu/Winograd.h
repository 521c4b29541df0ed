// Winograd F(2x2, 3x3) convolutions for the CPU backend (runtime/cpu/Winograd.cpp): 3x3 filters,
// stride 1, padding 1, activations in a blocked layout. oneDNN offers Winograd for f32 only on
// AVX-512; on AVX2 its direct kernels spend 9 multiplies per output where this spends 4, and on
// small feature maps (ResNet-18's stages 2-4 at 28x28 input) the direct kernels also lose time
// at the borders. Each direction is: transforms of 4x4 input tiles and of the filters (adds and
// halvings only), 16 GEMMs (a batched oneDNN matmul, or up to 64 channels register tiles of our
// own on a few tiles at a time), and a transform back.
#pragma once

#include <cstdint>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::winograd {

// Whether conv2d (x, w -> y), conv2d_backward_data (dy, w -> dx) or conv2d_backward_filter
// (x, dy -> dw) with these operands runs here: f32, a 3x3 filter, stride 1, padding 1, the
// activations in one blocked layout, and channels in and out: forward and backward data 16 to 64
// (the result's a multiple of 16: tiles a few at a time through transforms and GEMMs in L1) or
// at least 128 (tiles in chunks, a oneDNN GEMM); backward filter 16 to 32 (grouped, the filter
// a multiple of 16 wide) or at least 64, on even sizes below 128 (on odd ones the 2x2 tiles cover
// padding too). SPMD_WINOGRAD=0 in the environment turns it off (oneDNN's direct kernels
// everywhere).
bool applies(const KernelCall& call);

// The most floats one chunk of transformed tiles may hold (runtime/cpu/Winograd.cpp: tiles go
// through in chunks so that scratch does not grow with the batch); default 1 << 20. Tests lower
// it to run several chunks on small shapes. Returns the previous value; takes effect for steps
// prepared after the call.
int64_t setChunkFloats(int64_t floats);

// Whether the grouped convolutions use their AVX2+FMA code where the CPU has it (default true);
// tests turn it off to compare the portable code's bits with it. Returns the previous value.
bool setVectorGroups(bool on);

void forward(KernelCall& call);         // inputs: x, filter[, bias]; output: y
void backwardData(KernelCall& call);    // inputs: result_grad, filter; output: input_grad
void backwardFilter(KernelCall& call);  // inputs: x, result_grad; output: filter_grad

}  // namespace spmd::runtime::cpu::winograd
