// Winograd F(2x2, 3x3) convolutions for the CPU backend (runtime/cpu/Winograd.cpp): 3x3 filters,
// stride 1, padding 1, activations in a blocked layout. oneDNN offers Winograd for f32 only on
// AVX-512; on AVX2 its direct kernels spend 9 multiplies per output where this spends 4, and on
// small feature maps (ResNet-18's stages 2-4 at 28x28 input) the direct kernels also lose time
// at the borders. Each direction is: transforms of 4x4 input tiles and of the filters (adds and
// halvings only), 16 GEMMs (one-thread oneDNN matmuls on slices of the 16, or up to 64 channels
// register tiles of our own on a few tiles at a time), and a transform back. Both paths give the
// same bits on any thread count.
#pragma once

#include <cstdint>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::winograd {

// Grouped: up to 64 channels in and out (the backward filter up to 128, in blocks of up to 64),
// the result's channels a multiple of 16, kGroup tiles at a time through the transforms and GEMMs
// while they are in L1
// (AVX-512 or AVX2+FMA copies, or portable code, with the same bits: OwnIsa.h). Chunked: any channel count, the tiles
// in chunks through the 16 GEMMs as one-thread oneDNN matmuls (sliced::Gemm). Chunked4x4: the
// same with F(4x4, 3x3) (runtime/cpu/Winograd4x4.cpp): 36 GEMMs on a quarter of the tiles, 2.25
// multiplies an output where F(2x2, 3x3) takes 4, at a larger rounding error (its transforms
// divide by 6 and 24 and add up to 5-fold multiples): on wide layers of small feature maps.
enum class Path { Grouped, Chunked, Chunked4x4 };

// Whether `path` computes conv2d (x, w -> y), conv2d_backward_data (dy, w -> dx) or
// conv2d_backward_filter (x, dy -> dw) with these operands: f32, a 3x3 filter, stride 1,
// padding 1, the activations in one blocked layout, whole channel blocks.
bool runs(const KernelCall& call, Path path);
// Where `path` was measured to beat oneDNN's direct kernels on AVX2 (the order used untimed,
// SPMD_KERNEL_TIMING=0): forward and backward data grouped from 16 channels, chunked from 128;
// backward filter grouped from 16 (to 128), chunked from 64, on even sizes below 128 channels;
// Chunked4x4 never (only where timing finds it faster).
bool pays(const KernelCall& call, Path path);

// The most floats one chunk of transformed tiles may hold (runtime/cpu/Winograd.cpp: tiles go
// through in chunks so that scratch does not grow with the batch); default 1 << 20. Tests lower
// it to run several chunks on small shapes. Returns the previous value; takes effect for steps
// prepared after the call.
int64_t setChunkFloats(int64_t floats);

void forward(KernelCall& call, Path path);         // inputs: x, filter[, bias]; output: y
void backwardData(KernelCall& call, Path path);    // inputs: result_grad, filter; output: input_grad
void backwardFilter(KernelCall& call, Path path);  // inputs: x, result_grad; output: filter_grad

}  // namespace spmd::runtime::cpu::winograd
