// The type a `fused` step's call computes in (runtime/program/FusedBody.h's fusedComputeType on
// its operands' dtypes), with the step named in the error: what every backend's fused kernel asks
// first.
#pragma once

#include <vector>

#include "runtime/base/Error.h"
#include "runtime/device/Kernel.h"
#include "runtime/program/FusedBody.h"

namespace spmd::runtime {

inline DType fusedComputeType(const KernelCall& call) {
  std::vector<DType> in, out;
  for (const TensorView& t : call.in) in.push_back(t.dtype);
  for (const TensorView& t : call.out) out.push_back(t.dtype);
  try {
    return fusedComputeType(in, out);
  } catch (const Error& e) {
    throw Error("fused step (" + call.step.where() + "): " + e.what());
  }
}

}  // namespace spmd::runtime
