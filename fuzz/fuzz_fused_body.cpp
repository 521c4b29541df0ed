// libFuzzer target: the fused-body parser and its load index maps. Must parse or throw
// spmd::Error.
#include <cstdint>
#include <string>

#include "runtime/base/Error.h"
#include "runtime/program/FusedBody.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    spmd::runtime::FusedBody body = spmd::runtime::FusedBody::parse(text);
    body.checkArity(3, body.results.size());
    const int64_t space[] = {2, 3, 4};
    const int64_t input[] = {3};
    for (const auto& instr : body.instrs)
      if (instr.kind == spmd::runtime::FusedOpKind::load) spmd::runtime::loadStrides(instr, input, space);
  } catch (const spmd::Error&) {
  }
  return 0;
}
