// A check spmd-opt runs before parsing: MLIR 19 parses `array<i1: 1, 0>` (integer elements for
// a boolean array) into an attribute whose printer then reads a null pointer, so printing the
// IR, or any diagnostic that shows the op, crashes (upstream mlir-opt-19 crashes the same way).
// Found by fuzz_spmd_ir. Such input is refused; `array<i1: true, false>` is the valid spelling.
#pragma once

#include <optional>
#include <string_view>

#include "tools/spmd-opt/NestingCheck.h"

namespace spmd {

// The first `array<i1: ...>` (any spelling of the width: i1, i01, ...) whose elements are not
// all `true` or `false`, outside string literals and // comments.
std::optional<NestingProblem> checkBoolArrays(std::string_view text);

}  // namespace spmd
