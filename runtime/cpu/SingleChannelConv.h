// The filter gradient of a 3x3 convolution whose input has one channel (the stem of a network on
// grey images, Fashion-MNIST's) with its result gradient in a blocked layout
// (runtime/cpu/SingleChannelConv.cpp). oneDNN's backward-weights kernels vectorize over input
// channels and run this shape at ~6% of the AVX2 f32 peak (2.6-2.9 ms for ResNet-18's stem at
// width 16, batch 64, one thread); here each output-channel block's lanes take the nine taps at
// once (0.6 ms; `bench_conv_layers --width 16 --batch 64 --only stem`).
#pragma once

#include "runtime/device/Kernel.h"

namespace spmd::runtime::cpu::single_channel {

// Whether conv2d_backward_filter (x, dy -> dw) runs here: f32, x plain with one channel, dy
// nChw8c or nChw16c, a 3x3 filter, any stride and padding below the filter's size.
bool runs(const KernelCall& call);

// inputs: x, result_grad; output: filter_grad. Each image's sums in f32 (in pixel order, lane
// by lane), the images' sums added in double in image order: the same bits for any thread count
// and on every machine (no fused multiply-adds).
void backwardFilter(KernelCall& call);

}  // namespace spmd::runtime::cpu::single_channel
