// FusedBody::parse and the load index maps.
#include "runtime/program/FusedBody.h"

#include <algorithm>
#include <sstream>

#include "runtime/base/Error.h"
#include "runtime/base/RealText.h"
#include "runtime/base/Shape.h"

namespace spmd::runtime {
namespace {

constexpr FusedOpKind kKinds[] = {
    FusedOpKind::load, FusedOpKind::constant, FusedOpKind::round_bf16,
#define SPMD_FUSED_KIND(name, ...) FusedOpKind::name,
    SPMD_ELEMENTWISE_OPS(SPMD_FUSED_KIND)
#undef SPMD_FUSED_KIND
};

}  // namespace

const char* fusedOpName(FusedOpKind kind) {
  switch (kind) {
    case FusedOpKind::load: return "load";
    case FusedOpKind::constant: return "const";
    case FusedOpKind::round_bf16: return "round_bf16";
#define SPMD_FUSED_NAME(name, ...) \
  case FusedOpKind::name: return #name;
    SPMD_ELEMENTWISE_OPS(SPMD_FUSED_NAME)
#undef SPMD_FUSED_NAME
  }
  return "?";
}

int fusedArity(FusedOpKind kind) {
  switch (kind) {
    case FusedOpKind::load:
    case FusedOpKind::constant: return 0;
    case FusedOpKind::round_bf16: return 1;
#define SPMD_FUSED_ARITY(name, Functor, arity, ...) \
  case FusedOpKind::name: return arity;
    SPMD_ELEMENTWISE_OPS(SPMD_FUSED_ARITY)
#undef SPMD_FUSED_ARITY
  }
  return 0;
}

FusedBody FusedBody::parse(const std::string& text) {
  FusedBody body;
  std::istringstream statements(text);
  std::string statement;
  auto fail = [&](const std::string& why) -> void {
    throw Error("fused body '" + text + "': " + why + " (in '" + statement + "')");
  };
  auto ref = [&](std::istringstream& in) {
    std::string token;
    if (!(in >> token) || token.size() < 2 || token[0] != '%') fail("expected an operand %N");
    int id = -1;
    try {
      id = std::stoi(token.substr(1));
    } catch (const std::exception&) {
      fail("'" + token + "' is not an operand %N");
    }
    if (id < 0 || id >= static_cast<int>(body.instrs.size()))
      fail("operand " + token + " is used before it is defined");
    return id;
  };
  bool done = false;
  while (std::getline(statements, statement, ';')) {
    std::istringstream in(statement);
    std::string first;
    if (!(in >> first)) continue;
    if (done) fail("nothing may follow yield");
    if (first == "yield") {
      while (in >> std::ws && !in.eof()) body.results.push_back(ref(in));
      if (body.results.empty()) fail("yield needs at least one result");
      done = true;
      continue;
    }
    if (first != "%" + std::to_string(body.instrs.size())) fail("expected %" + std::to_string(body.instrs.size()) + " =");
    std::string equals, opName;
    if (!(in >> equals >> opName) || equals != "=") fail("expected '%N = op ...'");
    FusedInstr instr;
    bool known = false;
    for (FusedOpKind kind : kKinds)
      if (opName == fusedOpName(kind)) instr.kind = kind, known = true;
    if (!known) fail("unknown op '" + opName + "'");
    if (instr.kind == FusedOpKind::load) {
      if (!(in >> instr.input) || instr.input < 0) fail("load needs an input number");
      std::string word;
      if (in >> word) {
        if (word != "dims") fail("expected 'dims [...]' after the load's input");
        std::string rest;
        std::getline(in, rest);
        size_t open = rest.find('['), close = rest.find(']');
        if (open == std::string::npos || close == std::string::npos || close < open)
          fail("dims must be a list [a, b, ...]");
        std::istringstream list(rest.substr(open + 1, close - open - 1));
        std::string item;
        while (std::getline(list, item, ','))
          try {
            instr.dims.push_back(std::stoll(item));
          } catch (const std::exception&) {
            fail("'" + item + "' is not a dimension");
          }
        instr.broadcast = true;
      }
    } else if (instr.kind == FusedOpKind::constant) {
      std::string number;
      if (!(in >> number) || !parseReal(number, instr.value))
        fail("const needs a number (digits, inf, -inf or nan), got '" + number + "'");
    } else {
      instr.a = ref(in);
      if (fusedArity(instr.kind) == 2) instr.b = ref(in);
    }
    std::string extra;
    if (instr.kind != FusedOpKind::load && (in >> extra)) fail("unexpected '" + extra + "'");
    body.instrs.push_back(std::move(instr));
  }
  if (!done) throw Error("fused body '" + text + "' has no yield");
  return body;
}

void FusedBody::checkArity(size_t inputs, size_t outputs) const {
  if (results.size() != outputs)
    throw Error("fused body yields " + std::to_string(results.size()) + " values for " +
                std::to_string(outputs) + " outputs");
  for (const FusedInstr& in : instrs)
    if (in.kind == FusedOpKind::load && in.input >= static_cast<int>(inputs))
      throw Error("fused body loads input " + std::to_string(in.input) + " of " + std::to_string(inputs));
}

DType fusedComputeType(std::span<const DType> inputs, std::span<const DType> outputs) {
  if (outputs.empty()) throw Error("fused step has no outputs");
  const bool bf16 = std::find(inputs.begin(), inputs.end(), DType::bf16) != inputs.end() ||
                    std::find(outputs.begin(), outputs.end(), DType::bf16) != outputs.end();
  const DType compute = bf16 ? DType::f32 : outputs[0];
  auto check = [&](std::span<const DType> types, const char* which) {
    for (size_t k = 0; k < types.size(); ++k)
      if (types[k] != compute && !(compute == DType::f32 && types[k] == DType::bf16))
        throw Error("fused step computes in " + std::string(dtypeName(compute)) + " but its " + which + " " +
                    std::to_string(k) + " is " + std::string(dtypeName(types[k])) +
                    "; a body's operands share its type, or are bf16 where it is f32");
  };
  check(inputs, "input");
  check(outputs, "output");
  return compute;
}

std::vector<int64_t> loadStrides(const FusedInstr& load, std::span<const int64_t> input,
                                 std::span<const int64_t> space) {
  std::vector<int64_t> strides(space.size(), 0);
  auto describe = [&] {
    return "load of a " + shapeString(Shape(input.begin(), input.end())) + " input into " +
           shapeString(Shape(space.begin(), space.end()));
  };
  if (!load.broadcast) {
    if (!std::equal(input.begin(), input.end(), space.begin(), space.end()))
      throw Error(describe() + ": a load without dims needs the iteration space's shape");
    int64_t stride = 1;
    for (size_t d = space.size(); d-- > 0;) strides[d] = stride, stride *= space[d];
    return strides;
  }
  if (load.dims.size() != input.size())
    throw Error(describe() + ": dims has " + std::to_string(load.dims.size()) + " entries for " +
                std::to_string(input.size()) + " input dims");
  int64_t stride = 1;
  for (size_t i = input.size(); i-- > 0;) {
    int64_t d = load.dims[i];
    if (d < 0 || d >= static_cast<int64_t>(space.size()) || (input[i] != 1 && input[i] != space[d]))
      throw Error(describe() + ": input dim " + std::to_string(i) + " cannot map to result dim " +
                  std::to_string(d));
    if (input[i] != 1) strides[d] = stride;
    stride *= input[i];
  }
  return strides;
}

}  // namespace spmd::runtime
