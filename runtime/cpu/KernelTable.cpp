// The CPU backend's kernel table: the kernel library on the replica's thread, then the CPU's own
// kernels (runtime/cpu/Kernels.h) over it.
#include "runtime/cpu/CpuVariants.h"
#include "runtime/cpu/CpuDevice.h"
#include "runtime/cpu/HostLoop.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/OwnGelu.h"
#include "runtime/device/CustomKernels.h"
#include "runtime/kernels/Library.h"

namespace spmd::runtime {

void cpu::custom_call(KernelCall& call) { runCustomCall(call); }

const KernelTable& cpuKernels() {
  static const KernelTable table = [] {
    KernelTable t;
    kernels::addLibrary<cpu::HostLoop>(t, "kernel library, host loop (runtime/kernels)");
#define SPMD_OWN(name, source) t[#name] = Kernel{&cpu::name, source};
    SPMD_CPU_OPS(SPMD_OWN)
#undef SPMD_OWN
#define SPMD_OWN_ELEMENTWISE(name, Functor, ...)                                                     \
  t[#name] = Kernel{&cpu::name, cpu::kOwnF32<ew::Functor> ? "own vector loops in double for f32 (cpu/OwnGelu.h), "   \
                                                            "vectorized loops otherwise (cpu/Elementwise.cpp)"       \
                                                          : "vectorized loops (cpu/Elementwise.cpp)"};
    SPMD_ELEMENTWISE_OPS(SPMD_OWN_ELEMENTWISE)
#undef SPMD_OWN_ELEMENTWISE
    for (const VariantSet* set : cpu::cpuVariantSets()) {
      t.at(set->op).choose = &cpu::chooseCpuVariant;
      t.at(set->op).variants = set;
    }
    return t;
  }();
  return table;
}

}  // namespace spmd::runtime
