// Typed attribute records (runtime/program/OpAttrs.h): their catalog rows and their decoding.
#include "runtime/program/OpAttrs.h"

#include <map>
#include <string_view>

#include "runtime/base/Error.h"

namespace spmd::runtime {
namespace {

template <class T>
constexpr AttrKind kindOf() {
  if constexpr (std::is_same_v<T, attr_field::Int>) return AttrKind::Int;
  else if constexpr (std::is_same_v<T, attr_field::Ints>) return AttrKind::Ints;
  else if constexpr (std::is_same_v<T, attr_field::Real>) return AttrKind::Real;
  else if constexpr (std::is_same_v<T, attr_field::Flag>) return AttrKind::Flag;
  else return AttrKind::Text;  // Text and ReductionKind
}

// One field of `step`: its value, or the type's zero when an optional one is absent.
template <class T>
T field(const Step& step, const char* name, bool required) {
  auto it = step.attrs.find(name);
  if (it == step.attrs.end()) {
    if (!required) return T{};
    throw Error("step '" + step.op + "' (" + step.where() + ") has no attribute '" + name + "'");
  }
  using Stored = std::conditional_t<std::is_same_v<T, Reduction>, std::string, T>;
  const Stored* value = std::get_if<Stored>(&it->second);
  if (!value)
    throw Error("step '" + step.op + "' (" + step.where() + "): attribute '" + name + "' is not " +
                attrKindName(kindOf<T>()));
  if constexpr (std::is_same_v<T, Reduction>) {
    try {
      return parseReduction(*value);
    } catch (const Error& e) {
      throw Error("step '" + step.op + "' (" + step.where() + "): attribute '" + name + "': " + e.what());
    }
  } else {
    return *value;
  }
}

#define SPMD_ATTR_DECODE_FIELD(type, name, required) \
  record.name = field<attr_field::type>(step, #name, required);
#define SPMD_ATTR_DECODER(Record, FIELDS)     \
  OpRecord decode##Record(const Step& step) { \
    Record record;                            \
    FIELDS(SPMD_ATTR_DECODE_FIELD)            \
    return OpRecord{std::move(record)};       \
  }
SPMD_ATTR_RECORDS(SPMD_ATTR_DECODER)
#undef SPMD_ATTR_DECODER
#undef SPMD_ATTR_DECODE_FIELD

using Decoder = OpRecord (*)(const Step&);

const std::map<std::string_view, Decoder, std::less<>>& decoders() {
  static const std::map<std::string_view, Decoder, std::less<>> table = {
#define SPMD_ATTR_OP(op, Record) {#op, decode##Record},
      SPMD_OP_ATTR_RECORDS(SPMD_ATTR_OP)
#undef SPMD_ATTR_OP
  };
  return table;
}

// Reductions a field's kind spells but its op does not take: the dialect's verifiers refuse them
// in IR; a Program written or edited by hand meets this check before any kernel runs.
void checkReductions(const Step& step, const OpRecord& record) {
  const char* takes = nullptr;
  Reduction got{};
  if (const auto* s = std::get_if<ScatterReduceAttrs>(&record.value);
      s && s->reduction != Reduction::Max && s->reduction != Reduction::Min)
    takes = "max or min (a sum is take_along_axis_backward added to the input)", got = s->reduction;
  if (const auto* s = std::get_if<SegmentAttrs>(&record.value);
      s && s->reduction != Reduction::Max && s->reduction != Reduction::Min)
    takes = "max or min (a segment sum is embedding_backward)", got = s->reduction;
  if (const auto* w = std::get_if<WindowAttrs>(&record.value); w && w->reduction == Reduction::Min)
    takes = "max, sum or mean (a min window is -reduce_window(max, -x))", got = w->reduction;
  if (takes)
    throw Error("step '" + step.op + "' (" + step.where() + "): attribute 'reduction' is " + reductionName(got) +
                "; this op takes " + takes);
}

}  // namespace

#define SPMD_ATTR_SPEC(type, name, required) {#name, kindOf<attr_field::type>(), required},
#define SPMD_ATTR_SPECS(Record, FIELDS) const AttrSpec Record::kSpecs[] = {FIELDS(SPMD_ATTR_SPEC)};
SPMD_ATTR_RECORDS(SPMD_ATTR_SPECS)
#undef SPMD_ATTR_SPECS
#undef SPMD_ATTR_SPEC

std::span<const AttrSpec> programAttributes(std::string_view op) {
  static const std::map<std::string_view, std::span<const AttrSpec>, std::less<>> table = {
#define SPMD_ATTR_OP(op, Record) {#op, std::span<const AttrSpec>(Record::kSpecs)},
      SPMD_OP_ATTR_RECORDS(SPMD_ATTR_OP)
#undef SPMD_ATTR_OP
  };
  auto it = table.find(op);
  return it == table.end() ? std::span<const AttrSpec>() : it->second;
}

OpRecord decodedAttributes(const Step& step) {
  auto it = decoders().find(step.op);
  if (it == decoders().end()) return OpRecord{};
  OpRecord record = it->second(step);
  checkReductions(step, record);
  return record;
}

void decodeAttributes(Step& step) { step.record = std::make_shared<const OpRecord>(decodedAttributes(step)); }

}  // namespace spmd::runtime
