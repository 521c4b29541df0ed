// Horizontal fusion of a Program's adjacent fused steps that run one body on tensors of their own
// (the optimizer's per-parameter updates: 76 for ResNet-18, each a kernel launch): a run of such
// steps becomes one `fused` step of several segments (runtime/device/Segments.h), which the GPU
// and the simulator run as one kernel. Runs on the lowered Program, before the memory plan, so
// the plan sees the batched step's lifetimes.
#pragma once

#include "runtime/program/Program.h"

namespace spmd {

// Merges every maximal run of adjacent `fused` steps with the same body text whose buffers are
// all plain, of one dtype, and of their step's output shape (direct loads only), none reading
// another's output, into steps of at most runtime::maxFusedSegments (runtime/program/FusedBody.h) segments; returns how many
// steps it removed.
int batchFusedSteps(runtime::Program& program);

}  // namespace spmd
