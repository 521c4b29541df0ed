// saveProgram / loadProgram with nlohmann::json for the header.
#include "runtime/program/ProgramFile.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>

#include "runtime/base/AtomicFile.h"
#include "runtime/base/Checksum.h"
#include "runtime/base/InputFile.h"
#include "runtime/program/Layouts.h"
#include "runtime/program/ProgramCheck.h"
#include "runtime/base/RealText.h"

namespace spmd::runtime {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'M', 'D', 'P', 'R', 'O', 'G'};
constexpr char kSumMagic[8] = {'S', 'P', 'M', 'D', 'C', 'R', 'C', '1'};
// 3: buffers may carry a layout; 4: a checksum ends the file; 5: the call contract (placements, donors)
constexpr int kVersion = 5;


using Json = nlohmann::ordered_json;

Json attrJson(const Attr& attr) {
  return std::visit(
      [](const auto& v) -> Json {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) return {{"bool", v}};
        else if constexpr (std::is_same_v<T, int64_t>) return {{"int", v}};
        // JSON has no inf or nan: those (only) are written as their text.
        else if constexpr (std::is_same_v<T, double>)
          return std::isfinite(v) ? Json{{"float", v}} : Json{{"float", formatReal(v)}};
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return {{"ints", v}};
        else return {{"string", v}};
      },
      attr);
}

Attr attrOf(const Json& j) {
  if (!j.is_object() || j.size() != 1) throw Error("an attribute must be an object with one typed value");
  // Not `*j.items().begin()`: its key lives in a temporary (ASan: stack-use-after-scope).
  const std::string kind = j.begin().key();
  const Json& value = j.begin().value();
  if (kind == "bool") return value.get<bool>();
  if (kind == "int") return value.get<int64_t>();
  if (kind == "float") {
    double real = 0;
    if (value.is_string() && !parseReal(value.get<std::string>(), real))
      throw Error("float attribute '" + value.get<std::string>() + "' is not a number");
    return value.is_string() ? real : value.get<double>();
  }
  if (kind == "ints") return value.get<std::vector<int64_t>>();
  if (kind == "string") return value.get<std::string>();
  throw Error("unknown attribute kind '" + kind + "'");
}

Json placementsJson(const std::vector<Placement>& placements) {
  Json list = Json::array();
  for (const Placement& p : placements) {
    Json entry = {{"kind", placementName(p.kind)}};
    if (p.kind == Placement::Kind::Sliced) entry["full"] = p.full;
    if (p.kind == Placement::Kind::Mesh) entry["spec"] = p.spec;
    list.push_back(entry);
  }
  return list;
}

std::vector<Placement> placementsOf(const Json& list) {
  std::vector<Placement> placements;
  for (const Json& entry : list) {
    Placement p;
    const std::string kind = entry.at("kind").get<std::string>();
    if (kind == placementName(Placement::Kind::Mapped)) p.kind = Placement::Kind::Mapped;
    else if (kind == placementName(Placement::Kind::Sliced)) p.kind = Placement::Kind::Sliced;
    else if (kind == placementName(Placement::Kind::Mesh)) p.kind = Placement::Kind::Mesh;
    else if (kind != placementName(Placement::Kind::Replicated))
      throw Error("placement '" + kind + "' is not replicated, mapped, sliced or mesh");
    if (entry.contains("full")) p.full = entry.at("full").get<Shape>();
    if (entry.contains("spec")) p.spec = entry.at("spec").get<std::vector<std::string>>();
    placements.push_back(std::move(p));
  }
  return placements;
}

DType dtypeNamed(const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::i32, DType::bf16})
    if (name == dtypeName(t)) return t;
  throw Error("unknown dtype '" + name + "'");
}

}  // namespace

std::vector<std::byte> programFileBytes(const Program& program) {
  Json header = {{"format", "spmd-program"}, {"version", kVersion}, {"name", program.name},
                 {"arena_bytes", program.arenaBytes},
                 {"axis_name", program.axisName}, {"replicas", program.replicas}};
  if (program.microBatches != 1) header["micro_batches"] = program.microBatches;
  if (!program.mesh.empty()) header["mesh"] = {{"axes", program.mesh.names}, {"sizes", program.mesh.sizes}};
  Json buffers = Json::array();
  size_t offset = 0;
  for (const BufferDesc& b : program.buffers) {
    Json entry = {{"dtype", std::string(dtypeName(b.dtype))}, {"shape", b.shape}, {"offset", b.offset}};
    if (!b.layout.empty()) entry["layout"] = b.layout;
    if (!b.constant.empty()) {
      entry["constant"] = {offset, offset + b.constant.size()};
      offset += b.constant.size();
    }
    buffers.push_back(entry);
  }
  header["buffers"] = buffers;
  header["inputs"] = program.inputs;
  header["outputs"] = program.outputs;
  header["input_placements"] = placementsJson(program.inputPlacements);
  header["output_placements"] = placementsJson(program.outputPlacements);
  header["output_donors"] = program.outputDonors;
  Json steps = Json::array();
  for (const Step& s : program.steps) {
    Json attrs = Json::object();
    for (const auto& [name, value] : s.attrs) attrs[name] = attrJson(value);
    steps.push_back({{"op", s.op}, {"inputs", s.inputs}, {"outputs", s.outputs}, {"attrs", attrs},
                     {"location", s.location}, {"layer", s.layer}});
  }
  header["steps"] = steps;
  std::string text = header.dump(1);
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();
  std::vector<std::span<const std::byte>> parts = {std::as_bytes(std::span(kMagic)),
                                                   std::as_bytes(std::span(&length, 1)),
                                                   std::as_bytes(std::span(text.data(), text.size()))};
  for (const BufferDesc& b : program.buffers)
    if (!b.constant.empty()) parts.push_back(b.constant);
  const uint64_t sum = crc32Of(parts);  // stored as a u64
  parts.push_back(std::as_bytes(std::span(kSumMagic)));
  parts.push_back(std::as_bytes(std::span(&sum, 1)));
  std::vector<std::byte> bytes;
  for (std::span<const std::byte> part : parts) bytes.insert(bytes.end(), part.begin(), part.end());
  return bytes;
}

void saveProgram(const Program& program, const std::string& path) {
  std::vector<std::byte> bytes = programFileBytes(program);
  writeFileAtomically(path, {bytes});
}

Program loadProgram(const std::string& path) {
  requireRegularFile(path, "program", "SPMD_DUMP_IR=<dir> writes <dir>/program.spmd: name that file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open program (" + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(path + ": cannot find the program's size (" + std::strerror(errno) + ")");
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
    throw Error(path + ": cannot read program (" + std::strerror(errno) + ")");
  return readProgramBytes(bytes, path);
}

Program readProgramBytes(std::span<const std::byte> bytes, const std::string& path) {
  auto fail = [&](const std::string& what) { return Error(path + ": not a valid spmd program: " + what); };
  const uint64_t size = bytes.size();
  uint64_t length = 0;
  if (size < 16 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw fail("it does not start with SPMDPROG and a header length (was it written by saveProgram?)");
  std::memcpy(&length, bytes.data() + 8, 8);
  // The checksum first: nothing of a file changed after it was written is trusted.
  uint64_t sum = 0;
  if (size < 32 || std::memcmp(bytes.data() + size - 16, kSumMagic, 8) != 0)
    throw fail("it does not end with a checksum (truncated, or written by an older spmd release: recompile it)");
  std::memcpy(&sum, bytes.data() + size - 8, 8);
  if (crc32Of(bytes.first(size - 16)) != sum)
    throw fail("its content does not match its checksum: it was changed or damaged after it was written; "
               "recompile it or copy it again");
  if (length > size - 32) throw fail("the header length " + std::to_string(length) + " exceeds the file (truncated?)");
  const std::string text(reinterpret_cast<const char*>(bytes.data()) + 16, length);
  const std::span<const std::byte> blob = bytes.subspan(16 + length, size - 32 - length);

  Program program;
  try {
    Json header = Json::parse(text);
    if (header.at("format") != "spmd-program") throw Error("format is not spmd-program");
    if (header.at("version") != kVersion)
      throw Error("version " + header.at("version").dump() + " is not " + std::to_string(kVersion) +
                  " (written by another spmd release; recompile it)");
    program.name = header.at("name").get<std::string>();
    program.arenaBytes = header.at("arena_bytes").get<size_t>();
    program.axisName = header.at("axis_name").get<std::string>();
    program.replicas = header.at("replicas").get<int64_t>();
    if (header.contains("micro_batches")) program.microBatches = header.at("micro_batches").get<int64_t>();
    for (const Json& b : header.at("buffers")) {
      BufferDesc desc{dtypeNamed(b.at("dtype").get<std::string>()), b.at("shape").get<Shape>(), {},
                      b.at("offset").get<int64_t>()};
      if (b.contains("layout")) {
        desc.layout = b.at("layout").get<std::string>();
        // throws naming an unknown layout
        if (std::string problem = layoutProblem(desc.layout, desc.shape); !problem.empty())
          throw Error("buffer " + std::to_string(program.buffers.size()) + " has layout " + desc.layout +
                      " but shape " + shapeString(desc.shape) + " (" + problem + ")");
      }
      if (b.contains("constant")) {
        auto range = b.at("constant").get<std::vector<uint64_t>>();
        if (range.size() != 2 || range[0] > range[1] || range[1] > blob.size() || range[1] - range[0] != desc.bytes())
          throw Error("constant of buffer " + std::to_string(program.buffers.size()) +
                      " does not match its shape or lies outside the " + std::to_string(blob.size()) +
                      " data bytes (truncated file?)");
        desc.constant.assign(blob.begin() + std::ptrdiff_t(range[0]), blob.begin() + std::ptrdiff_t(range[1]));
      }
      program.buffers.push_back(std::move(desc));
    }
    // Ids, shapes and everything else are checked against each other below (checkProgram).
    auto ids = [](const Json& list) { return list.get<std::vector<int>>(); };
    program.inputs = ids(header.at("inputs"));
    program.outputs = ids(header.at("outputs"));
    program.inputPlacements = placementsOf(header.at("input_placements"));
    program.outputPlacements = placementsOf(header.at("output_placements"));
    if (header.contains("mesh")) {
      program.mesh.names = header.at("mesh").at("axes").get<std::vector<std::string>>();
      program.mesh.sizes = header.at("mesh").at("sizes").get<std::vector<int64_t>>();
    }
    program.outputDonors = ids(header.at("output_donors"));
    for (const Json& s : header.at("steps")) {
      Step step;
      step.op = s.at("op").get<std::string>();
      step.location = s.at("location").get<std::string>();
      if (s.contains("layer")) step.layer = s.at("layer").get<std::string>();
      step.inputs = ids(s.at("inputs"));
      step.outputs = ids(s.at("outputs"));
      for (const auto& [name, value] : s.at("attrs").items()) step.attrs[name] = attrOf(value);
      program.steps.push_back(std::move(step));
    }
    checkProgram(program);
  } catch (const Json::exception& e) {
    throw fail(std::string("bad header (") + e.what() + ")");
  } catch (const Error& e) {
    throw fail(e.what());
  }
  return program;
}

}  // namespace spmd::runtime
