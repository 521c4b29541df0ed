// Convolutions with stride 2 (ResNet's stage entries and their 1x1 projections) on blocked
// activations as explicit GEMMs (runtime/cpu/StridedConv.cpp): the input's windows gathered into
// a matrix (im2col), one oneDNN matmul per chunk of images, and the result written back in the
// blocked layout. On AVX2 oneDNN's direct kernels run the wide 3x3 shapes at 40-57% of the f32
// peak (few output pixels per image, 9 taps that stride over the input), and a 1x1 one on an
// odd-sized input at 15-20%; a plain GEMM of the same sizes runs at 65-85%.
#pragma once

#include <cstdint>

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::strided {

// Whether conv2d (x, w -> y), conv2d_backward_data (dy, w -> dx) or conv2d_backward_filter
// (x, dy -> dw) with these operands runs here: f32, stride 2, the activations in one blocked
// layout, and a 3x3 filter with padding 1 or a 1x1 filter without padding.
bool runs(const KernelCall& call);
// Where it was measured to beat oneDNN's direct kernels on AVX2 (the order used untimed,
// SPMD_KERNEL_TIMING=0): 3x3 with at least 128 channels in (below that, at ResNet-18's
// 64-channel stage entry, the GEMM was no faster), 1x1 on an input that is not twice the
// output's size (oneDNN's own 1x1 kernel takes the even ones).
bool pays(const KernelCall& call);

// The most floats one chunk's window matrix may hold (default 1 << 22, 16 MB); images go through
// in equal chunks so that scratch does not grow with the batch. Tests lower it to run several
// chunks on small shapes. Returns the previous value; takes effect for steps prepared after it.
int64_t setChunkFloats(int64_t floats);

void forward(KernelCall& call);         // inputs: x, filter[, bias]; output: y
void backwardData(KernelCall& call);    // inputs: result_grad, filter; output: input_grad
void backwardFilter(KernelCall& call);  // inputs: x, result_grad; output: filter_grad

}  // namespace spmd::runtime::cpu::strided
