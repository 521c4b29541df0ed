// The table of reference kernels, by op name.
#include "runtime/device/CustomKernels.h"
#include "runtime/reference/Reference.h"

namespace spmd::runtime {

namespace reference {
// A user's op: its registered host kernel is its own oracle.
void custom_call(KernelCall& call) { runCustomCall(call); }
}  // namespace reference

const KernelTable& referenceKernels() {
  static const KernelTable table = {
#define SPMD_TABLE_ENTRY(name, ...) {#name, Kernel{&reference::name, "reference loops (runtime/reference)"}},
      SPMD_PROGRAM_OPS(SPMD_TABLE_ENTRY)
#undef SPMD_TABLE_ENTRY
  };
  return table;
}

}  // namespace spmd::runtime
