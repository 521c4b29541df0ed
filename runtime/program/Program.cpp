// Attribute access for Steps and the Program's text form.
#include "runtime/program/Program.h"

#include <sstream>

#include "runtime/base/RealText.h"

namespace spmd::runtime {

const Attr& Step::attr(const std::string& name) const {
  auto it = attrs.find(name);
  if (it == attrs.end())
    throw Error("step '" + op + "' (" + location + ") has no attribute '" + name + "'");
  return it->second;
}

namespace {
template <typename T>
const T& get(const Step& step, const std::string& name, const char* kind) {
  const Attr& value = step.attr(name);
  if (auto* typed = std::get_if<T>(&value)) return *typed;
  throw Error("step '" + step.op + "' (" + step.location + "): attribute '" + name +
              "' is not " + kind);
}

void printAttr(std::ostream& os, const Attr& attr) {
  std::visit(
      [&](const auto& value) {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          os << shapeString(value);
        else if constexpr (std::is_same_v<T, std::string>)
          os << '"' << value << '"';
        else if constexpr (std::is_same_v<T, bool>)
          os << (value ? "true" : "false");
        else if constexpr (std::is_same_v<T, double>)
          os << formatReal(value);
        else
          os << value;
      },
      attr);
}
}  // namespace

const std::vector<int64_t>& Step::ints(const std::string& name) const {
  return get<std::vector<int64_t>>(*this, name, "an integer list");
}
int64_t Step::integer(const std::string& name) const { return get<int64_t>(*this, name, "an integer"); }
std::string Step::where() const {
  if (layer.empty()) return location;
  return location.empty() ? layer : layer + ", " + location;
}

double Step::real(const std::string& name) const { return get<double>(*this, name, "a float"); }
const std::string& Step::text(const std::string& name) const {
  return get<std::string>(*this, name, "a string");
}
bool Step::flag(const std::string& name) const {
  return attrs.count(name) ? get<bool>(*this, name, "a bool") : false;
}

const char* placementName(Placement::Kind kind) {
  switch (kind) {
    case Placement::Kind::Replicated: return "replicated";
    case Placement::Kind::Mapped: return "mapped";
    case Placement::Kind::Sliced: return "sliced";
    case Placement::Kind::Mesh: return "mesh";
  }
  return "?";
}

int64_t MeshShape::replicas() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    if (s < 1 || __builtin_mul_overflow(n, s, &n)) return -1;  // a file's sizes are outside bytes
  return n;
}

int MeshShape::index(const std::string& axis) const {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == axis) return int(i);
  return -1;
}

int64_t MeshShape::stride(int axis) const {
  int64_t stride = 1;
  for (size_t k = size_t(axis) + 1; k < sizes.size(); ++k) stride *= sizes[k];
  return stride;
}

std::string MeshShape::describe() const {
  std::string text = "{";
  for (size_t i = 0; i < names.size() && i < sizes.size(); ++i)
    text += (i ? ", " : "") + names[i] + ": " + std::to_string(sizes[i]);
  return text + "}";
}

std::string specString(const std::vector<std::string>& spec) {
  std::string text = "{";
  for (size_t d = 0; d < spec.size(); ++d) text += (d ? ", " : "") + ("\"" + spec[d] + "\"");
  return text + "}";
}

std::string Program::toText() const {
  std::ostringstream os;
  auto ids = [&](const std::vector<int>& list) {
    std::string text;
    for (size_t i = 0; i < list.size(); ++i) text += (i ? ", %" : "%") + std::to_string(list[i]);
    return text;
  };
  size_t total = 0;
  for (const BufferDesc& b : buffers) total += b.bytes();
  os << "program @" << name << " {  // " << buffers.size() << " buffers, " << steps.size()
     << " steps, " << total << " bytes";
  if (arenaBytes) os << ", arena " << arenaBytes << " bytes";
  if (!axisName.empty()) os << ", axis '" << axisName << "' of " << replicas << " replicas";
  os << '\n';
  for (size_t i = 0; i < buffers.size(); ++i) {
    os << "  buffer %" << i << " : " << dtypeName(buffers[i].dtype)
       << shapeString(buffers[i].shape);
    if (!buffers[i].layout.empty()) os << " " << buffers[i].layout;
    if (!buffers[i].constant.empty()) os << " constant";
    if (buffers[i].offset >= 0) os << " @" << buffers[i].offset;
    os << '\n';
  }
  os << "  inputs (" << ids(inputs) << ")\n";
  // The call contract: the inputs and outputs that are not plainly replicated, and donation's pairs.
  auto contract = [&](const char* what, const std::vector<int>& list, const std::vector<Placement>& placements) {
    // A part of an accumulated step has no placements, but its apply part may pair donors.
    for (size_t i = 0; i < list.size(); ++i) {
      const bool donee = what[0] == 'o' && i < outputDonors.size() && outputDonors[i] >= 0;
      const bool placed = i < placements.size() && placements[i].kind != Placement::Kind::Replicated;
      if (!placed && !donee) continue;
      os << "  " << what << " " << i << " %" << list[i];
      if (i < placements.size()) os << " " << placementName(placements[i].kind);
      if (placed && placements[i].kind == Placement::Kind::Sliced) os << " of " << shapeString(placements[i].full);
      if (placed && placements[i].kind == Placement::Kind::Mesh)
        os << " " << specString(placements[i].spec) << " on " << mesh.describe();
      if (donee) os << (i < placements.size() ? "," : "") << " takes input " << outputDonors[i] << "'s buffers when donated";
      os << '\n';
    }
  };
  contract("input", inputs, inputPlacements);
  for (const Step& step : steps) {
    os << "  " << step.op << " (" << ids(step.inputs) << ") -> (" << ids(step.outputs) << ")";
    if (!step.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [key, value] : step.attrs) {
        os << (first ? "" : ", ") << key << " = ";
        printAttr(os, value);
        first = false;
      }
      os << "}";
    }
    if (!step.location.empty() || !step.layer.empty()) os << "  // " << step.where();
    os << '\n';
  }
  os << "  outputs (" << ids(outputs) << ")\n";
  contract("output", outputs, outputPlacements);
  os << "}\n";
  return os.str();
}

}  // namespace spmd::runtime
