// What a step costs, from its op and its buffers' shapes alone: the bytes it reads and writes and,
// for the ops that compute rather than move data, its floating-point operations. The device
// profile (Executor, SPMD_PROFILE=device) divides them by the step's time: achieved GB/s and
// GFLOP/s beside each step, against the device's memory bandwidth and peak.
#pragma once

#include <cstdint>

#include "runtime/program/Program.h"

namespace spmd::runtime {

struct StepCost {
  int64_t bytes = 0;  // every input read once, every output written once
  double flops = 0;   // multiply-adds count 2; 0 for data movement and elementwise ops
};

StepCost costOf(const Step& step, const Program& program);

}  // namespace spmd::runtime
