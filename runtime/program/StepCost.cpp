// StepCost: bytes of a step's buffers, FLOPs of convolutions and matmuls.
#include "runtime/program/StepCost.h"

namespace spmd::runtime {
namespace {

double elements(const BufferDesc& b) { return double(numElements(b.shape)); }

}  // namespace

StepCost costOf(const Step& step, const Program& program) {
  StepCost cost;
  for (int id : step.inputs) cost.bytes += int64_t(program.buffers.at(size_t(id)).bytes());
  for (int id : step.outputs) cost.bytes += int64_t(program.buffers.at(size_t(id)).bytes());
  auto shapeOf = [&](int id) -> const Shape& { return program.buffers.at(size_t(id)).shape; };
  if (step.inputs.size() < 2 || step.outputs.empty()) return cost;
  // A convolution's multiply-adds: every output element of the forward convolution (N, K, P, Q)
  // sums C * R * S products; its two backward ops do the same products.
  const bool conv = step.op == "conv2d" || step.op == "conv2d_backward_data" || step.op == "conv2d_backward_filter";
  if (conv) {
    const Shape& filter = step.op == "conv2d_backward_filter" ? shapeOf(step.outputs[0]) : shapeOf(step.inputs[1]);
    const BufferDesc& y = program.buffers.at(size_t(step.op == "conv2d" ? step.outputs[0] : step.op == "conv2d_backward_data"
                                                                                                  ? step.inputs[0]
                                                                                                  : step.inputs[1]));
    if (filter.size() == 4) cost.flops = 2.0 * elements(y) * double(filter[1] * filter[2] * filter[3]);
  } else if (step.op == "matmul") {
    // [M, K] x [K, N] (transpose_lhs: a is [K, M]): each output element sums K products.
    const Shape& a = shapeOf(step.inputs[0]);
    if (a.size() >= 2) {
      const bool transposed = step.flag("transpose_lhs");
      const int64_t k = transposed ? a[a.size() - 2] : a.back();
      cost.flops = 2.0 * elements(program.buffers.at(size_t(step.outputs[0]))) * double(k);
    }
  }
  return cost;
}

}  // namespace spmd::runtime
