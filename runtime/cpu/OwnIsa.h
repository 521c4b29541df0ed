// Our own CPU kernels' instruction set, chosen by us rather than by the loader, so that one
// machine can run and test each path: the widest of AVX-512, AVX2 (with FMA) and the portable
// baseline this CPU has, capped by SPMD_MAX_CPU_ISA (`avx512`, `avx2` or `portable`), as
// ONEDNN_MAX_CPU_ISA caps oneDNN's. Every path gives the same bits (each lane sums in its own
// fixed order, without contracted multiply-adds: these files build with -ffp-contract=off), so
// the cap changes the speed only.
//
// A kernel written once runs on all three: mark it SPMD_ISA_BODY (always inlined), and call it
// through onOwnIsa<kernel>(args...), which inlines it into a copy compiled for each ISA and calls
// the one ownIsa() names (a switch, not the loader's ifunc: ThreadSanitizer builds run every copy
// too); onOwnIsaEach<a, b, c> gives each ISA a body of its own (one kernel at each register
// width). What the body calls is compiled into the copy only where it inlines: keep its loops in it.
#pragma once

#include <optional>

namespace spmd::runtime::cpu {

enum class OwnIsa { portable, avx2, avx512 };

// The CPU's widest, capped by SPMD_MAX_CPU_ISA (read once; an unknown value throws, naming the
// valid ones) or by setOwnIsaCap.
OwnIsa ownIsa();
const char* ownIsaName(OwnIsa isa);

// Tests and benchmarks: cap our kernels (nullopt: SPMD_MAX_CPU_ISA's cap again); the previous cap.
std::optional<OwnIsa> setOwnIsaCap(std::optional<OwnIsa> cap);

// The CPU's widest, uncapped (what SPMD_MAX_CPU_ISA can lower).
OwnIsa cpuOwnIsa();

// Which copies ran since clearOwnIsaRuns (in this process, any thread; tests read it to show a
// path ran). A copy marks itself on its first call only: once set, the flag is read, never
// written, so the kernels' threads do not contend for it.
void markOwnIsaRun(OwnIsa isa);
bool ownIsaRan(OwnIsa isa);
void clearOwnIsaRuns();

#define SPMD_ISA_BODY __attribute__((always_inline)) inline
#define SPMD_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define SPMD_TARGET_AVX2 __attribute__((target("avx2,fma")))

namespace isa_copies {
template <auto Kernel, class... Args>
SPMD_TARGET_AVX512 void avx512(Args&&... args) {
  markOwnIsaRun(OwnIsa::avx512);
  Kernel(static_cast<Args&&>(args)...);
}
template <auto Kernel, class... Args>
SPMD_TARGET_AVX2 void avx2(Args&&... args) {
  markOwnIsaRun(OwnIsa::avx2);
  Kernel(static_cast<Args&&>(args)...);
}
template <auto Kernel, class... Args>
void portable(Args&&... args) {
  markOwnIsaRun(OwnIsa::portable);
  Kernel(static_cast<Args&&>(args)...);
}
}  // namespace isa_copies

// A body per ISA (the same kernel instantiated for each one's register width): the one `isa`
// names runs, in that ISA's copy. For a kernel whose data is laid out for one ISA's width before
// the call (read ownIsa() once, lay out, then call with it).
template <auto Avx512, auto Avx2, auto Portable, class... Args>
void onIsaEach(OwnIsa isa, Args&&... args) {
  switch (isa) {
    case OwnIsa::avx512: return isa_copies::avx512<Avx512>(static_cast<Args&&>(args)...);
    case OwnIsa::avx2: return isa_copies::avx2<Avx2>(static_cast<Args&&>(args)...);
    case OwnIsa::portable: break;
  }
  isa_copies::portable<Portable>(static_cast<Args&&>(args)...);
}

// The same with the ISA ownIsa() names.
template <auto Avx512, auto Avx2, auto Portable, class... Args>
void onOwnIsaEach(Args&&... args) {
  onIsaEach<Avx512, Avx2, Portable>(ownIsa(), static_cast<Args&&>(args)...);
}

template <auto Kernel, class... Args>
void onOwnIsa(Args&&... args) {
  onOwnIsaEach<Kernel, Kernel, Kernel>(static_cast<Args&&>(args)...);
}

}  // namespace spmd::runtime::cpu
