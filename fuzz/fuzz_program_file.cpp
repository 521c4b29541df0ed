// libFuzzer target: Program files. Two modes, by the input's first byte:
//  - raw ('S', as every Program file starts): the bytes are the file (magic, checksum, header,
//    buffers, steps, constants, memory plan);
//  - structure-aware (anything else): the bytes are edits of the numbers of a valid Program
//    (replicas, arena size, dimensions, dtypes, offsets, operand and result ids, integer
//    attributes, step order, the call contract's placements, full shapes and donors), saved as a valid file with its checksum, so that every field
//    check (runtime/program/ProgramCheck.h) is reached with valid JSON and wrong numbers.
// Either way the file must load (and print) or throw spmd::Error.
#include <cstring>
#include <vector>

#include "runtime/base/Error.h"
#include "runtime/program/ProgramFile.h"

namespace {

using spmd::runtime::Program;

const Program& seed() {
  static const Program program = spmd::runtime::loadProgram(SPMD_FUZZ_SEED_PROGRAM);
  return program;
}

// Applies edits of 11 bytes each: kind, a 16-bit index, a 64-bit value.
Program edited(const uint8_t* data, size_t size) {
  Program p = seed();
  static const int64_t interesting[] = {-1, 0, 1, 2, 3, 8, 255, 4096, INT32_MAX, int64_t(1) << 32, int64_t(1) << 62, INT64_MAX};
  for (size_t at = 1; at + 11 <= size; at += 11) {
    uint8_t kind = data[at];
    uint16_t index;
    int64_t raw;
    std::memcpy(&index, data + at + 1, 2);
    std::memcpy(&raw, data + at + 3, 8);
    // Half the time a value from the list above, else the raw bits.
    int64_t value = (raw & 1) ? interesting[uint64_t(raw >> 1) % std::size(interesting)] : raw;
    auto& buffers = p.buffers;
    auto& steps = p.steps;
    switch (kind % 15) {
      case 0: p.replicas = value; break;
      case 1: p.arenaBytes = size_t(value); break;
      case 2:
        if (!buffers.empty()) {
          auto& shape = buffers[index % buffers.size()].shape;
          if (!shape.empty()) shape[(index >> 8) % shape.size()] = value;
        }
        break;
      case 3: if (!buffers.empty()) buffers[index % buffers.size()].offset = value; break;
      case 4:
        if (!steps.empty() && !steps[index % steps.size()].inputs.empty()) {
          auto& ids = steps[index % steps.size()].inputs;
          ids[(index >> 8) % ids.size()] = int(value);
        }
        break;
      case 5:
        if (!steps.empty() && !steps[index % steps.size()].outputs.empty()) {
          auto& ids = steps[index % steps.size()].outputs;
          ids[(index >> 8) % ids.size()] = int(value);
        }
        break;
      case 6: if (!p.inputs.empty()) p.inputs[index % p.inputs.size()] = int(value); break;
      case 7: if (!p.outputs.empty()) p.outputs[index % p.outputs.size()] = int(value); break;
      case 8: if (!buffers.empty()) buffers[index % buffers.size()].dtype = spmd::DType(uint64_t(value) % 3); break;
      case 9:
        if (!steps.empty())
          for (auto& [name, attr] : steps[index % steps.size()].attrs) {
            if (auto* v = std::get_if<int64_t>(&attr)) {
              *v = value;
              break;
            }
            if (auto* list = std::get_if<std::vector<int64_t>>(&attr); list && !list->empty()) {
              (*list)[(index >> 8) % list->size()] = value;
              break;
            }
          }
        break;
      case 10:
        if (!steps.empty() && !steps[index % steps.size()].inputs.empty()) steps[index % steps.size()].inputs.pop_back();
        break;
      case 12:
        if (!p.outputDonors.empty()) p.outputDonors[index % p.outputDonors.size()] = int(value);
        break;
      case 13: {
        auto& placements = (index & 1) ? p.outputPlacements : p.inputPlacements;
        if (!placements.empty())
          placements[(index >> 1) % placements.size()].kind = spmd::runtime::Placement::Kind(uint64_t(value) % 3);
        break;
      }
      case 14: {
        auto& placements = (index & 1) ? p.outputPlacements : p.inputPlacements;
        if (!placements.empty()) {
          auto& full = placements[(index >> 1) % placements.size()].full;
          if (full.empty()) full.push_back(value);
          else full[(index >> 8) % full.size()] = value;
        }
        break;
      }
      case 11:
        if (steps.size() > 1) std::swap(steps[index % steps.size()], steps[(index >> 8) % steps.size()]);
        break;
    }
  }
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // In memory: no file system in the loop (saveProgram and loadProgram add only the I/O).
  std::vector<std::byte> bytes;
  if (size > 0 && data[0] != 'S')
    bytes = spmd::runtime::programFileBytes(edited(data, size));
  else
    bytes.assign(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  try {
    spmd::runtime::Program program = spmd::runtime::readProgramBytes(bytes, "program.spmd");
    (void)program.toText();
  } catch (const spmd::Error&) {
  }
  return 0;
}
