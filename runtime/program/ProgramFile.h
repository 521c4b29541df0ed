// Programs on disk: compile on a machine with LLVM/MLIR, run anywhere the runtime runs (the
// runtime never links MLIR). Layout: the 8 bytes "SPMDPROG", a little-endian u64 header length,
// a JSON header (buffers, steps with attributes, inputs, outputs, memory plan), then the
// constants' bytes. Fused steps carry their body text, so generated kernels travel too.
#pragma once

#include <string>

#include "runtime/program/Program.h"

namespace spmd::runtime {

// Written atomically (runtime/AtomicFile).
void saveProgram(const Program& program, const std::string& path);

// Validates everything it reads (magic, version, JSON, buffer ids, dtypes, shapes, constant
// ranges, the memory plan) and throws spmd::Error naming the file and what is wrong.
Program loadProgram(const std::string& path);

}  // namespace spmd::runtime
