// libFuzzer target: Program files (header, buffers, steps, constants, memory plan). Must load
// (and then print) or throw spmd::Error.
#include "fuzz/FuzzInput.h"
#include "runtime/base/Error.h"
#include "runtime/program/ProgramFile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = spmd::fuzz::writeInput("program.spmd", data, size);
  try {
    spmd::runtime::Program program = spmd::runtime::loadProgram(path);
    (void)program.toText();
  } catch (const spmd::Error&) {
  }
  return 0;
}
