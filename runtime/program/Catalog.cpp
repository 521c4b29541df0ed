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

namespace {

using enum AttrKind;
constexpr AttrSpec kConv[] = {{"stride", Ints}, {"padding", Ints}};
constexpr AttrSpec kEpsilon[] = {{"epsilon", Real}};
constexpr AttrSpec kWindow[] = {{"reduction", Text}, {"window", Ints},   {"stride", Ints},
                                {"padding", Ints},   {"dilation", Ints}, {"count_include_pad", Flag}};
constexpr AttrSpec kAxis[] = {{"axis", Int}};
constexpr AttrSpec kAxes[] = {{"axes", Ints}};
constexpr AttrSpec kAxisName[] = {{"axis_name", Text}};

const std::map<std::string_view, std::span<const AttrSpec>, std::less<>>& attributeTable() {
  static const std::map<std::string_view, std::span<const AttrSpec>, std::less<>> table = [] {
    static constexpr AttrSpec dims[] = {{"dims", Ints}}, slice[] = {{"start", Ints}, {"limit", Ints}},
                              pad[] = {{"low", Ints}, {"high", Ints}}, perm[] = {{"perm", Ints}},
                              matmul[] = {{"transpose_lhs", Flag, false}, {"transpose_rhs", Flag, false}},
                              allReduce[] = {{"axis_name", Text}, {"reduction", Text}},
                              allGather[] = {{"axis_name", Text}, {"axis_size", Int}},
                              ppermute[] = {{"axis_name", Text}, {"pairs", Ints}},
                              allToAll[] = {{"axis_name", Text}, {"axis_size", Int}, {"split_axis", Int},
                                            {"concat_axis", Int}},
                              body[] = {{"body", Text}, {"segments", Int, false}},
                              normRelu[] = {{"epsilon", Real}, {"relu", Flag, false}};
    std::map<std::string_view, std::span<const AttrSpec>, std::less<>> t;
    for (const char* op : {"conv2d", "conv2d_backward_data", "conv2d_backward_filter"}) t[op] = kConv;
    for (const char* op : {"batch_norm_infer", "batch_norm_train_backward"}) t[op] = kEpsilon;
    t["batch_norm_train"] = normRelu;
    for (const char* op : {"reduce_window", "reduce_window_backward"}) t[op] = kWindow;
    for (const char* op : {"softmax", "log_softmax", "concatenate", "argmax"}) t[op] = kAxis;
    for (const char* op : {"reduce_sum", "reduce_mean", "reduce_max"}) t[op] = kAxes;
    static constexpr AttrSpec axisIndex[] = {{"axis_name", Text}, {"of_device", Flag, false}};
    t["axis_index"] = axisIndex;
    t["broadcast_in_dim"] = dims, t["slice"] = slice, t["pad"] = pad, t["transpose"] = perm, t["matmul"] = matmul;
    t["all_reduce"] = t["reduce_scatter"] = allReduce, t["all_gather"] = allGather, t["fused"] = body;
    t["ppermute"] = ppermute, t["all_to_all"] = allToAll;
    return t;
  }();
  return table;
}

}  // namespace

std::span<const AttrSpec> programAttributes(std::string_view op) {
  auto it = attributeTable().find(op);
  return it == attributeTable().end() ? std::span<const AttrSpec>() : it->second;
}

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
