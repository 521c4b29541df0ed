// checkBoolArrays: one pass over the text, skipping strings and comments, reading each array<...>.
#include "tools/spmd-opt/BoolArrayCheck.h"

#include <cctype>
#include <string>

namespace spmd {

std::optional<NestingProblem> checkBoolArrays(std::string_view text) {
  size_t line = 1, lineStart = 0;
  bool inString = false, inComment = false;
  auto isIdentifier = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line, lineStart = i + 1, inComment = false;
      continue;
    }
    if (inComment) continue;
    if (inString) {
      if (c == '\\') ++i;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      inComment = true;
      continue;
    }
    if (text.compare(i, 5, "array") != 0 || (i > 0 && isIdentifier(text[i - 1]))) continue;
    const size_t at = i;
    size_t j = i + 5;
    auto skipSpace = [&] {
      while (j < text.size() && std::isspace(static_cast<unsigned char>(text[j])) && text[j] != '\n') ++j;
    };
    skipSpace();
    if (j >= text.size() || text[j] != '<') continue;
    ++j;
    skipSpace();
    if (j >= text.size() || text[j] != 'i') continue;
    size_t digits = ++j;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    std::string width(text.substr(digits, j - digits));
    while (width.size() > 1 && width[0] == '0') width.erase(0, 1);
    if (width != "1") continue;
    skipSpace();
    if (j >= text.size() || text[j] != ':') continue;
    ++j;
    // Elements up to '>': each must be exactly true or false.
    std::string element;
    bool bad = false;
    for (; j < text.size(); ++j) {
      if (text[j] == ',' || text[j] == '>') {
        bad |= element != "true" && element != "false" && !(element.empty() && text[j] == '>');
        element.clear();
        if (text[j] == '>') break;
        continue;
      }
      if (!std::isspace(static_cast<unsigned char>(text[j]))) element += text[j];
    }
    bad |= j >= text.size() || text[j] != '>';  // cut off: refuse rather than guess
    if (bad)
      return NestingProblem{line, at - lineStart + 1,
                            "a boolean array (array<i1: ...>) takes the elements true and false; other "
                            "elements make MLIR 19 build an attribute that crashes when printed, so "
                            "spmd-opt refuses them"};
    for (size_t k = at; k < j && k < text.size(); ++k)  // newlines inside the array
      if (text[k] == '\n') ++line, lineStart = k + 1;
    i = j;
  }
  return std::nullopt;
}

}  // namespace spmd
