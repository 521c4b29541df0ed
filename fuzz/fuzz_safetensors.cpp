// libFuzzer target: the safetensors checkpoint reader. Must load or throw spmd::Error.
#include "frontend/io/Safetensors.h"
#include "fuzz/FuzzInput.h"
#include "runtime/base/Error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = spmd::fuzz::writeInput("checkpoint.safetensors", data, size);
  try {
    spmd::io::loadSafetensors(path);
  } catch (const spmd::Error&) {
  }
  return 0;
}
