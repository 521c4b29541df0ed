// checkNesting: one pass over the text, tracking strings, comments, line and column.
#include "tools/spmd-opt/NestingCheck.h"

namespace spmd {

std::optional<NestingProblem> checkNesting(std::string_view text, size_t limit) {
  size_t depth = 0, line = 1, column = 0;
  bool inString = false, inComment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    ++column;
    if (c == '\n') {
      ++line, column = 0, inComment = false;
      continue;
    }
    if (inComment) continue;
    if (inString) {
      if (c == '\\') ++i, ++column;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') inComment = true;
    else if (c == '(' || c == '[' || c == '{' || c == '<') {
      if (++depth > limit)
        return NestingProblem{line, column,
                              "the input nests brackets more than " + std::to_string(limit) +
                                  " levels deep; spmd-opt refuses it rather than overflow the "
                                  "parser's stack (real IR nests a few dozen levels at most)"};
    } else if ((c == ')' || c == ']' || c == '}' || (c == '>' && (i == 0 || text[i - 1] != '-'))) && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace spmd
