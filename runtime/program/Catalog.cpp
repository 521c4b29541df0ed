// The catalog's lookups.
#include "runtime/program/Catalog.h"

#include <map>
#include <set>

#include "runtime/base/Error.h"

namespace spmd::runtime {

bool isProgramOp(std::string_view op) {
  static const std::set<std::string_view, std::less<>> ops = {
#define SPMD_CATALOG_NAME(name, ...) #name,
      SPMD_PROGRAM_OPS(SPMD_CATALOG_NAME)
#undef SPMD_CATALOG_NAME
  };
  return ops.count(op) != 0;
}

using enum AttrKind;

const char* attrKindName(AttrKind kind) {
  switch (kind) {
    case Int: return "an integer";
    case Ints: return "a list of integers";
    case Real: return "a number";
    case Flag: return "a boolean";
    case Text: return "a string";
  }
  return "?";
}

const char* reductionName(Reduction op) {
  switch (op) {
    case Reduction::Sum: return "sum";
    case Reduction::Mean: return "mean";
    case Reduction::Max: return "max";
    case Reduction::Min: return "min";
  }
  return "?";
}

Reduction parseReduction(const std::string& name) {
  for (Reduction op : kReductions)
    if (name == reductionName(op)) return op;
  throw Error("unknown reduction '" + name + "'; expected sum, mean, max or min");
}

}  // namespace spmd::runtime
