// Programs on disk: compile on a machine with LLVM/MLIR, run anywhere the runtime runs (the
// runtime never links MLIR). Layout: the 8 bytes "SPMDPROG", a little-endian u64 header length,
// a JSON header (buffers, steps with attributes, inputs, outputs, memory plan), the constants'
// bytes, then the 8 bytes "SPMDCRC1" and a little-endian u64 holding the CRC-32 of everything
// before them, so that a file changed after it was written is refused. Fused steps carry their
// body text, so generated kernels travel too.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "runtime/program/Program.h"

namespace spmd::runtime {

// Written atomically (runtime/AtomicFile).
void saveProgram(const Program& program, const std::string& path);
// The file's bytes, as saveProgram writes them.
std::vector<std::byte> programFileBytes(const Program& program);

// Validates everything it reads (magic, checksum, version, JSON, buffer ids, dtypes, shapes,
// constant ranges, then every field against the others: checkProgram, ProgramCheck.h) and
// throws spmd::Error naming the file and what is wrong.
Program loadProgram(const std::string& path);
// The same from the file's bytes; `path` names them in errors.
Program readProgramBytes(std::span<const std::byte> bytes, const std::string& path);

}  // namespace spmd::runtime
