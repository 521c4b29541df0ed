// The liveness-based memory plan: places every intermediate buffer of a Program at an offset in
// one arena so that buffers live at the same step never overlap, and sizes the arena.
#pragma once

#include "runtime/program/Program.h"

namespace spmd {

// Greedy by size: largest buffers first, each at the lowest aligned offset that fits between
// the buffers already placed whose lifetimes overlap its own. Inputs and constants stay apart, as do
// outputs computed in their donor's buffers (runtime::inPlaceOutputs).
void planMemory(runtime::Program& program);

}  // namespace spmd
