// The arithmetic a step asks for, counted as the textbook kernels do it: each convolution as a
// direct convolution (2 x output elements x input channels x kernel area, forward and both
// backward kernels alike) and each matmul as a plain GEMM (2 x M x N x K); elementwise work,
// normalisation and reductions are not counted. So a Winograd convolution shows as more FLOP/s
// than the arithmetic it does, as PyTorch's and cuDNN's reports count it too.
#pragma once

#include <cmath>

#include "runtime/program/Program.h"

namespace bench {

// A convolution whose larger activation side (y forward, dy backward) has `outElements`
// elements and whose filter is [out, in, kh, kw].
inline double convFlops(double outElements, const spmd::Shape& filter) {
  return 2.0 * outElements * double(filter[1] * filter[2] * filter[3]);
}

inline double programFlops(const spmd::runtime::Program& program) {
  auto shape = [&](int id) -> const spmd::Shape& { return program.buffers[id].shape; };
  auto count = [&](int id) { return double(spmd::numElements(shape(id))); };
  double flops = 0;
  for (const auto& step : program.steps) {
    if (step.op == "conv2d" || step.op == "conv2d_backward_data")  // (x, w) -> y; (dy, w) -> dx
      flops += convFlops(step.op == "conv2d" ? count(step.outputs[0]) : count(step.inputs[0]), shape(step.inputs[1]));
    else if (step.op == "conv2d_backward_filter")  // (x, dy) -> dw
      flops += convFlops(count(step.inputs[1]), shape(step.outputs[0]));
    else if (step.op == "matmul")  // M x K times K x N, either side transposed: K from the sizes
      flops += 2.0 * count(step.outputs[0]) *
               std::sqrt(count(step.inputs[0]) * count(step.inputs[1]) / count(step.outputs[0]));
  }
  return flops;
}

}  // namespace bench
