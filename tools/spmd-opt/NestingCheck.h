// A check spmd-opt runs before parsing: MLIR's parser recurses once per nesting level (regions,
// attribute lists, types), so absurdly deep input would overflow the stack instead of failing.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace spmd {

struct NestingProblem {
  size_t line = 0, column = 0;  // 1-based, where the limit is crossed
  std::string message;
};

// The deepest nesting of (), [], {} and <> in `text` (outside string literals and // comments;
// the '>' of '->' does not close anything); a problem when it exceeds `limit`.
std::optional<NestingProblem> checkNesting(std::string_view text, size_t limit);

}  // namespace spmd
